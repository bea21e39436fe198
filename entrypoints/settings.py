"""Settings read from the environment once, in the composition root, one object per concern.

Every variable is declared in ``entrypoints.settings_table`` (type, default, roles, help) and
read through ``entrypoints.settings_reader.Environment``; names follow the reference service
where the concept is the same. A missing or invalid setting raises ``SettingsError`` naming it;
``fetcher`` prints one line per problem and exits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from adapters.common.postgres import PostgresAddress
from adapters.crypto.keys import InvalidMasterKey, KeyRing
from domain.tenant import SINGLE_TENANCY, Tenancy, is_valid_tenant_id
from entrypoints.connection_settings import ConnectionSettings
from entrypoints.observability_settings import TracingSettings
from entrypoints.settings_reader import Environment, check_required
from entrypoints.settings_table import SettingsError

DISTRIBUTION = "fetcher"
UNKNOWN_VERSION = "unknown"


def package_version() -> str:
    """The installed distribution's version (``pip install`` of this tree, the image's
    ``/opt/fetcher``); ``unknown`` when the code runs from a tree that is not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def service_version(env: Mapping[str, str] | Environment | None = None) -> str:
    """The one version every place reports (``fetcher --version``, ``/version``, ``/readyz``,
    the OpenAPI document, traces): ``VERSION`` when set, else the package's."""
    return Environment.of(env).optional("VERSION") or package_version()


GRPC_EXPORTER = "opentelemetry.exporter.otlp.proto.grpc"


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _tracing_settings(read: Environment) -> TracingSettings:
    tracing = TracingSettings.from_env(read)
    exports_grpc = tracing.enabled and tracing.exporter == "otlp" and tracing.protocol == "grpc"
    if exports_grpc and not _installed(GRPC_EXPORTER):
        raise SettingsError(
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc (the default) needs the otlp-grpc extra, not "
            "installed here: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, or install "
            "'fetcher[otlp-grpc]' (the image: --build-arg FETCHER_EXTRAS=otlp-grpc)"
        )
    return tracing


__all__ = ["Environment", "Settings", "SettingsError"]


def listen_address(env: Mapping[str, str] | Environment) -> tuple[str, int]:
    """``SERVER_ADDRESS``: ``host:port``, ``[ipv6]:port``, ``:port`` (every interface, as the
    reference ships it) or a bare ``port`` (loopback: a port alone never opens the service to
    the network). Default ``127.0.0.1:4006``."""
    raw = Environment.of(env).text("SERVER_ADDRESS")
    host, colon, port = raw.rpartition(":")
    if not colon:
        host = "127.0.0.1"
    elif not host:
        host = "0.0.0.0"
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not (port.isascii() and port.isdigit()) or not host or "[" in host or "]" in host:
        raise SettingsError(f"SERVER_ADDRESS must be host:port or a port, got {raw!r}")
    number = int(port)
    if not 0 < number < 65536:
        raise SettingsError(f"SERVER_ADDRESS port must be 1-65535, got {raw!r}")
    return host, number


@dataclass(frozen=True, slots=True)
class HttpSettings:
    host: str
    port: int
    header_timeout_seconds: float = 10.0
    """Time a client has to send a request's headers (from connecting, or from the first byte
    of a following request); then 408 and the connection is closed."""
    body_timeout_seconds: float = 30.0
    """Time a client has to send a request's body once its headers are in; then 408."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> HttpSettings:
        read = Environment.of(env)
        host, number = listen_address(read)
        return cls(
            host=host,
            port=number,
            header_timeout_seconds=float(read.integer("FETCHER_HTTP_HEADER_TIMEOUT_SECONDS")),
            body_timeout_seconds=float(read.integer("FETCHER_HTTP_BODY_TIMEOUT_SECONDS")),
        )


EventLoop = Literal["uvloop", "asyncio"]


def _event_loop(env: Environment) -> EventLoop:
    """``FETCHER_EVENT_LOOP``: ``uvloop`` or ``asyncio`` (the standard library's loop); unset,
    uvloop where it is installed (it is not on Windows)."""
    name = "FETCHER_EVENT_LOOP"
    raw = env.choice(name)
    installed = find_spec("uvloop") is not None
    if not raw:
        return "uvloop" if installed else "asyncio"
    if raw == "asyncio":
        return "asyncio"
    if not installed:
        raise SettingsError(f"{name} is uvloop, which is not installed: use asyncio")
    return "uvloop"


DEFAULT_HEALTH_PORT = 4007
DEFAULT_DRAIN_SECONDS = 12
DEPLOYMENT_MODES = ("saas", "byoc", "local")


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """Health, readiness, metrics and shutdown (README "Health, readiness and metrics")."""

    health_port: int = DEFAULT_HEALTH_PORT
    """``HEALTH_PORT``: where ``fetcher worker`` and ``fetcher relay`` answer ``/health``,
    ``/readyz`` and ``/metrics``, on the host of ``SERVER_ADDRESS`` (``fetcher api`` and
    ``fetcher serve`` answer on the API port). Out of range (≤ 0 or > 65535): 4007, as the
    reference."""
    drain_seconds: int = DEFAULT_DRAIN_SECONDS
    """``READYZ_DRAIN_DELAY_SEC``: after SIGTERM or SIGINT, how long ``/readyz`` answers 503
    ``draining`` before the listener closes and in-flight work is finished; ``0`` or unset:
    12, negative: 1, as the reference."""
    deployment_mode: str = "local"
    """``DEPLOYMENT_MODE``: ``saas``, ``byoc`` or ``local`` (any other value: ``local``),
    reported by ``/readyz``."""
    version: str = UNKNOWN_VERSION
    """The version ``/readyz`` reports: ``OTEL_RESOURCE_SERVICE_VERSION`` when set (the
    reference's name), else the service's one version (``VERSION``, else the package's)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> ProbeSettings:
        read = Environment.of(env)
        port = read.integer("HEALTH_PORT")
        drain = read.integer("READYZ_DRAIN_DELAY_SEC")
        mode = read.text("DEPLOYMENT_MODE").lower()
        return cls(
            health_port=port if 0 < port < 65536 else DEFAULT_HEALTH_PORT,
            drain_seconds=DEFAULT_DRAIN_SECONDS if drain == 0 else max(drain, 1),
            deployment_mode=mode if mode in DEPLOYMENT_MODES else "local",
            version=read.optional("OTEL_RESOURCE_SERVICE_VERSION") or service_version(read),
        )


@dataclass(frozen=True, slots=True)
class KeySettings:
    master_key: str | None = field(repr=False)
    version: str
    previous: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> KeySettings:
        read = Environment.of(env)
        return cls(
            master_key=read.optional("APP_ENC_KEY"),
            version=read.text("APP_ENC_KEY_VERSION"),
            previous=read.text("APP_ENC_KEYS_PREVIOUS"),
        )

    def ring(self) -> KeyRing:
        """The key ring of these settings; ``InvalidMasterKey`` when there is no master key or
        a key does not decode."""
        if self.master_key is None:
            raise InvalidMasterKey("APP_ENC_KEY is not set")
        return KeyRing(self.master_key, self.version, self.previous or None)


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """Signed checkpoints of the event log (README "Audit trail")."""

    checkpoint_every: int = 1000
    """``FETCHER_AUDIT_CHECKPOINT_EVERY``: a checkpoint after this many records."""
    checkpoint_seconds: int = 60
    """``FETCHER_AUDIT_CHECKPOINT_SECONDS``: or after this many seconds, if any record came."""
    signing_key: str | None = field(default=None, repr=False)
    """``FETCHER_AUDIT_SIGNING_KEY``: base64 Ed25519 private key (32-byte seed); by default
    the key is derived from ``APP_ENC_KEY``."""
    witness: bool = True
    """``FETCHER_AUDIT_WITNESS``: each checkpoint is also written to object storage."""
    events: bool = False
    """``FETCHER_AUDIT_CHECKPOINT_EVENTS``: each checkpoint is also published as a CloudEvent."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> AuditSettings:
        read = Environment.of(env)
        return cls(
            checkpoint_every=read.integer("FETCHER_AUDIT_CHECKPOINT_EVERY"),
            checkpoint_seconds=read.integer("FETCHER_AUDIT_CHECKPOINT_SECONDS"),
            signing_key=read.optional("FETCHER_AUDIT_SIGNING_KEY"),
            witness=read.flag("FETCHER_AUDIT_WITNESS"),
            events=read.flag("FETCHER_AUDIT_CHECKPOINT_EVENTS"),
        )


def _broker_url(env: Environment) -> str | None:
    raw = env.optional("RABBITMQ_URL")
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in {"amqp", "amqps"} or not parts.hostname:
        raise SettingsError("RABBITMQ_URL must be an amqp:// or amqps:// URL with a host")
    return raw


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    url: str | None = field(repr=False)
    work_queue: str
    events_exchange: str
    cloudevents_source: str
    workers: int
    declare_topology: bool | None = None
    """``FETCHER_BROKER_DECLARE_TOPOLOGY``: declare the reference topology at start on the
    virtual host of ``RABBITMQ_URL`` (work queue with its dead-letter exchange and queue, the
    events exchange, the two example event queues bound to it; idempotent). Unset: on for
    ``fetcher serve``, off for ``api``, ``worker`` and ``relay`` (production brokers are
    provisioned from definitions; the user then needs no configure permission)."""

    def declares_topology(self, *, all_roles: bool) -> bool:
        """Whether a process declares the topology: as set, else only ``fetcher serve``
        (``all_roles``)."""
        return all_roles if self.declare_topology is None else self.declare_topology

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> BrokerSettings:
        read = Environment.of(env)
        return cls(
            url=_broker_url(read),
            work_queue=read.text("RABBITMQ_FETCHER_WORK_QUEUE"),
            events_exchange=read.text("RABBITMQ_JOB_EVENTS_EXCHANGE"),
            cloudevents_source=read.text("STREAMING_CLOUDEVENTS_SOURCE"),
            workers=read.integer("RABBITMQ_NUMBERS_OF_WORKERS"),
            declare_topology=read.maybe_flag("FETCHER_BROKER_DECLARE_TOPOLOGY"),
        )


@dataclass(frozen=True, slots=True)
class StorageSettings:
    endpoint: str | None
    bucket: str | None
    region: str
    key_prefix: str
    access_key_id: str | None = field(repr=False)
    secret_key: str | None = field(repr=False)
    path_style: bool

    @property
    def uses_s3(self) -> bool:
        return bool(self.bucket)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> StorageSettings:
        read = Environment.of(env)
        endpoint = read.optional("OBJECT_STORAGE_ENDPOINT")
        if endpoint is not None:
            parts = urlsplit(endpoint)
            if parts.scheme not in {"http", "https"} or not parts.hostname:
                raise SettingsError("OBJECT_STORAGE_ENDPOINT must be an http(s) URL with a host")
        bucket = read.optional("OBJECT_STORAGE_BUCKET")
        if endpoint and not bucket:
            raise SettingsError(
                "OBJECT_STORAGE_BUCKET is required when OBJECT_STORAGE_ENDPOINT is set"
            )
        access = read.optional("OBJECT_STORAGE_ACCESS_KEY_ID")
        secret = read.optional("OBJECT_STORAGE_SECRET_KEY")
        if bool(access) != bool(secret):
            raise SettingsError(
                "OBJECT_STORAGE_ACCESS_KEY_ID and OBJECT_STORAGE_SECRET_KEY must be set together"
            )
        return cls(
            endpoint=endpoint,
            bucket=bucket,
            region=read.text("OBJECT_STORAGE_REGION"),
            key_prefix=read.text("OBJECT_STORAGE_KEY_PREFIX"),
            access_key_id=access,
            secret_key=secret,
            path_style=read.flag("OBJECT_STORAGE_USE_PATH_STYLE", default=bool(endpoint)),
        )


@dataclass(frozen=True, slots=True)
class EngineSettings:
    max_result_bytes: int
    timeout_seconds: float
    parallelism: int
    pending_timeout_seconds: int
    lease_seconds: int = 20
    """How long a claim holds without its worker's heartbeat (renewed every quarter of it)."""
    outage_seconds: int = 120
    """How long a claim rides out the result storage or the database being down."""
    dispatch_timeout_seconds: int = 600
    """A work order the relay could not publish for this long after the request fails the
    job (``job.failed`` is emitted once the broker takes it)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> EngineSettings:
        read = Environment.of(env)
        max_bytes = read.integer("ENGINE_MAX_RESULT_BYTES")
        return cls(
            max_result_bytes=max_bytes if max_bytes > 0 else MAX_RESULT_BYTES,
            timeout_seconds=float(read.integer("ENGINE_TIMEOUT_SECONDS")),
            parallelism=4,
            pending_timeout_seconds=read.integer("FETCHER_PENDING_TIMEOUT_SECONDS"),
            lease_seconds=read.integer("FETCHER_LEASE_SECONDS"),
            outage_seconds=read.integer("FETCHER_DEPENDENCY_OUTAGE_SECONDS"),
            dispatch_timeout_seconds=read.integer("FETCHER_DISPATCH_TIMEOUT_SECONDS"),
        )


MAX_RESULT_BYTES = 256 * 1024 * 1024


ASYMMETRIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
MAX_LEEWAY_SECONDS = 300
MIN_SECRET_BYTES = 32


def _url(env: Environment, name: str) -> str | None:
    raw = env.optional(name)
    if raw is None:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise SettingsError(f"{name} must be an http(s) URL")
    if parts.username or parts.password:
        raise SettingsError(f"{name} must not carry credentials")
    return raw


def _origin(raw: str) -> str:
    parts = urlsplit(raw)
    if raw != "*" and (
        parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}
    ):
        raise SettingsError(
            f"FETCHER_CORS_ORIGINS must list origins such as https://app.example.com, got {raw!r}"
        )
    return raw.rstrip("/")


def _pem(raw: str) -> str | None:
    """Inline PEM text, or the path of a PEM file."""
    if not raw or raw.startswith("-----BEGIN"):
        return raw or None
    try:
        return Path(raw).read_text()
    except OSError as error:
        raise SettingsError(
            f"FETCHER_AUTH_PUBLIC_KEY is neither PEM text nor a readable file: {error.strerror}"
        ) from None


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """Authentication, authorisation and CORS of the HTTP API (README "Authentication").

    Tokens are verified when a key source is set: ``FETCHER_AUTH_ISSUER`` alone (OIDC
    discovery), or with ``FETCHER_AUTH_JWKS_URL``, ``FETCHER_AUTH_PUBLIC_KEY`` or
    ``FETCHER_AUTH_HS256_SECRET`` (one of the three). Whether the API may run without
    authentication depends on its listen address; ``entrypoints.composition.security``
    decides at start.
    """

    issuer: str | None = None
    """``FETCHER_AUTH_ISSUER``: the expected ``iss`` of every token; with no other key source,
    also where the keys are found (``<issuer>/.well-known/openid-configuration`` →
    ``jwks_uri``)."""
    jwks_url: str | None = None
    """``FETCHER_AUTH_JWKS_URL``: the issuer's JSON Web Key Set, read there (no discovery)."""
    public_key: str | None = field(default=None, repr=False)
    """``FETCHER_AUTH_PUBLIC_KEY``: one PEM public key (RSA, EC or Ed25519), as text or as the
    path of a PEM file."""
    hs256_secret: str | None = field(default=None, repr=False)
    """``FETCHER_AUTH_HS256_SECRET``: a shared secret (at least 32 bytes) for small setups;
    tokens are then HS256 only."""
    audience: tuple[str, ...] = ()
    """``FETCHER_AUTH_AUDIENCE``: the accepted ``aud`` values (comma-separated; required with a
    key source)."""
    algorithms: tuple[str, ...] = ()
    """``FETCHER_AUTH_ALGORITHMS``: the allowed signing algorithms (comma-separated); by default
    every asymmetric one the key fits, ``HS256`` with the secret; never ``none``."""
    leeway_seconds: int = 30
    """``FETCHER_AUTH_LEEWAY_SECONDS``: clock skew allowed on ``exp``, ``nbf`` and ``iat`` (0 to
    300)."""
    permissions_claim: str = "scope"
    """``FETCHER_AUTH_PERMISSIONS_CLAIM``: the claim granting permissions, a space-separated
    string or a list; a dotted path reads nested claims (``realm_access.roles``)."""
    tenant_claim: str = "tenantId"
    """``FETCHER_AUTH_TENANT_CLAIM``: the claim naming the caller's tenant (dotted path too)."""
    plugin_enabled: bool = False
    """``PLUGIN_AUTH_ENABLED``: ask the reference's authorization service for each request."""
    plugin_address: str | None = None
    """``PLUGIN_AUTH_ADDRESS``: that service's base URL (``POST <address>/v1/authorize``)."""
    disabled_insecure: bool = False
    """``FETCHER_AUTH_DISABLED_INSECURE``: run without authentication on an address beyond
    loopback (every route open to anyone who reaches it; warned at every start)."""
    cors_origins: tuple[str, ...] = ()
    """``FETCHER_CORS_ORIGINS``: the origins CORS allows (comma-separated); none: CORS off."""
    console_client_id: str | None = None
    """``FETCHER_CONSOLE_CLIENT_ID``: the console's public client at the issuer; it signs in
    with the authorisation code flow and PKCE (no client secret)."""

    @property
    def verifies_tokens(self) -> bool:
        return self.issuer is not None

    @property
    def enabled(self) -> bool:
        return self.verifies_tokens or self.plugin_enabled

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> SecuritySettings:
        read = Environment.of(env)
        issuer = _url(read, "FETCHER_AUTH_ISSUER")
        jwks_url = _url(read, "FETCHER_AUTH_JWKS_URL")
        public_key = _pem(read.text("FETCHER_AUTH_PUBLIC_KEY"))
        secret = read.optional("FETCHER_AUTH_HS256_SECRET")
        sources = [
            name
            for name, value in (
                ("FETCHER_AUTH_JWKS_URL", jwks_url),
                ("FETCHER_AUTH_PUBLIC_KEY", public_key),
                ("FETCHER_AUTH_HS256_SECRET", secret),
            )
            if value
        ]
        if len(sources) > 1:
            raise SettingsError(f"set only one of {', '.join(sources)}")
        if sources and issuer is None:
            raise SettingsError(f"FETCHER_AUTH_ISSUER is required with {sources[0]}")
        if secret is not None and len(secret.encode()) < MIN_SECRET_BYTES:
            raise SettingsError(
                f"FETCHER_AUTH_HS256_SECRET must be at least {MIN_SECRET_BYTES} bytes"
            )
        audience = read.listed("FETCHER_AUTH_AUDIENCE")
        if issuer is not None and not audience:
            raise SettingsError("FETCHER_AUTH_AUDIENCE is required with FETCHER_AUTH_ISSUER")
        if issuer is None and audience:
            raise SettingsError("FETCHER_AUTH_AUDIENCE needs FETCHER_AUTH_ISSUER")
        plugin = read.flag("PLUGIN_AUTH_ENABLED")
        address = _url(read, "PLUGIN_AUTH_ADDRESS")
        if plugin and address is None:
            raise SettingsError("PLUGIN_AUTH_ADDRESS is required when PLUGIN_AUTH_ENABLED=true")
        disabled = read.flag("FETCHER_AUTH_DISABLED_INSECURE")
        if disabled and (issuer is not None or plugin):
            raise SettingsError(
                "FETCHER_AUTH_DISABLED_INSECURE=true contradicts the authentication configured"
            )
        leeway = read.integer("FETCHER_AUTH_LEEWAY_SECONDS")
        return cls(
            issuer=issuer,
            jwks_url=jwks_url,
            public_key=public_key,
            hs256_secret=secret,
            audience=audience,
            algorithms=_algorithms(read, issuer=issuer, secret=secret is not None),
            leeway_seconds=leeway,
            permissions_claim=read.text("FETCHER_AUTH_PERMISSIONS_CLAIM"),
            tenant_claim=read.text("FETCHER_AUTH_TENANT_CLAIM"),
            plugin_enabled=plugin,
            plugin_address=address if plugin else None,
            disabled_insecure=disabled,
            cors_origins=_cors_origins(read),
            console_client_id=read.optional("FETCHER_CONSOLE_CLIENT_ID"),
        )


def _algorithms(env: Environment, *, issuer: str | None, secret: bool) -> tuple[str, ...]:
    name = "FETCHER_AUTH_ALGORITHMS"
    listed = env.listed(name)
    if listed and issuer is None:
        raise SettingsError(f"{name} needs FETCHER_AUTH_ISSUER")
    if any(item.lower() == "none" for item in listed):
        raise SettingsError(f"{name} must not allow 'none'")
    if secret:
        if listed and listed != ("HS256",):
            raise SettingsError(f"{name} must be HS256 with FETCHER_AUTH_HS256_SECRET")
        return ("HS256",)
    unknown = [item for item in listed if item not in ASYMMETRIC_ALGORITHMS]
    if unknown:
        raise SettingsError(
            f"{name}: {', '.join(unknown)} not allowed (HS256 only with "
            f"FETCHER_AUTH_HS256_SECRET); choose from {', '.join(ASYMMETRIC_ALGORITHMS)}"
        )
    return listed or ASYMMETRIC_ALGORITHMS


def _cors_origins(env: Environment) -> tuple[str, ...]:
    origins = tuple(_origin(item) for item in env.listed("FETCHER_CORS_ORIGINS"))
    if "*" in origins and len(origins) > 1:
        raise SettingsError("FETCHER_CORS_ORIGINS: '*' stands alone")
    return origins


@dataclass(frozen=True, slots=True)
class TenancySettings:
    """Multi-tenant mode (README "Tenants"). Set the same on every role: the API tenants
    requests, the worker and relay see the tenants' internal datasources alike."""

    enabled: bool = False
    """``MULTI_TENANT_ENABLED``: every request runs as the tenant its verified token names;
    the API refuses to start without token verification."""
    allowed: tuple[str, ...] | None = None
    """``MULTI_TENANT_ALLOWED_TENANTS``: the tenants served (comma-separated); unset: any
    tenant a verified token names."""

    @property
    def tenancy(self) -> Tenancy:
        return Tenancy.multi(self.allowed) if self.enabled else SINGLE_TENANCY

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> TenancySettings:
        read = Environment.of(env)
        enabled = read.flag("MULTI_TENANT_ENABLED")
        name = "MULTI_TENANT_ALLOWED_TENANTS"
        allowed = read.listed(name)
        if allowed and not enabled:
            raise SettingsError(f"{name} needs MULTI_TENANT_ENABLED=true")
        invalid = [item for item in allowed if not is_valid_tenant_id(item)]
        if invalid:
            raise SettingsError(
                f"{name}: {invalid[0]!r} is not a tenant id (1 to 64 letters, digits, '_' or "
                "'-', starting with a letter or a digit; not 'single-tenant')"
            )
        return cls(enabled=enabled, allowed=allowed or None)


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    """The service's own database, ``FETCHER_DATABASE_URL``, parsed once, here.

    A ``postgresql://`` URL gives ``postgres``: the event store and the SQL adapters (connections,
    job index) share that database. Otherwise each lives in a SQLite file: the URL's one file
    for ``sqlite:///path``, by default two files in the data folder.
    """

    postgres: PostgresAddress | None
    event_store_file: Path
    sql_file: Path
    configured: bool
    """Whether ``FETCHER_DATABASE_URL`` was given (the embedded default has none)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment, data_dir: Path) -> DatabaseSettings:
        url = Environment.of(env).text("FETCHER_DATABASE_URL")
        defaults = {
            "event_store_file": data_dir / "fetcher.sqlite3",
            "sql_file": data_dir / "fetcher-data.sqlite3",
        }
        if not url:
            return cls(postgres=None, configured=False, **defaults)
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            return cls(postgres=None, event_store_file=path, sql_file=path, configured=True)
        if url.startswith(("postgresql://", "postgres://")):
            try:
                return cls(postgres=PostgresAddress.from_url(url), configured=True, **defaults)
            except ValueError as error:
                raise SettingsError(f"FETCHER_DATABASE_URL is invalid: {error}") from None
        raise SettingsError("FETCHER_DATABASE_URL must be a postgresql:// or sqlite:/// URL")


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """What the command-line tools (``keys``, ``event``, ``result``, ``audit``) read."""

    keys: KeySettings
    audit_signing_key: str | None = field(default=None, repr=False)
    external_hmac_key: str | None = field(default=None, repr=False)
    """``FETCHER_EXTERNAL_HMAC_KEY``: hex key that verifies event signatures."""
    storage_key: str | None = field(default=None, repr=False)
    """``FETCHER_STORAGE_KEY``: hex key that decrypts stored results."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment | None = None) -> ToolSettings:
        read = Environment.of(env)
        return cls(
            keys=KeySettings.from_env(read),
            audit_signing_key=read.optional("FETCHER_AUDIT_SIGNING_KEY"),
            external_hmac_key=read.optional("FETCHER_EXTERNAL_HMAC_KEY"),
            storage_key=read.optional("FETCHER_STORAGE_KEY"),
        )


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    database: DatabaseSettings
    http: HttpSettings
    keys: KeySettings
    broker: BrokerSettings
    storage: StorageSettings
    engine: EngineSettings
    version: str
    connections: ConnectionSettings = field(default_factory=ConnectionSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    tracing: TracingSettings = field(default_factory=TracingSettings)
    probes: ProbeSettings = field(default_factory=ProbeSettings)
    tenancy: TenancySettings = field(default_factory=TenancySettings)
    audit: AuditSettings = field(default_factory=AuditSettings)
    event_loop: EventLoop = "uvloop"
    """``FETCHER_EVENT_LOOP``: the event loop every role runs on, ``uvloop`` (where installed,
    the default) or ``asyncio``, the standard library's, to fall back to."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | Environment | None = None, *, role: str | None = None
    ) -> Settings:
        """The settings of ``env`` (the process environment by default). With ``role``, the
        settings that role cannot start without are checked first: one ``SettingsError``
        lists every one missing."""
        read = Environment.of(env)
        if role is not None:
            check_required(role, read.values)
        data_dir = Path(read.text("FETCHER_DATA_DIR")).resolve()
        tenancy = TenancySettings.from_env(read)
        return cls(
            data_dir=data_dir,
            database=DatabaseSettings.from_env(read, data_dir),
            http=HttpSettings.from_env(read),
            keys=KeySettings.from_env(read),
            broker=BrokerSettings.from_env(read),
            storage=StorageSettings.from_env(read),
            engine=EngineSettings.from_env(read),
            version=service_version(read),
            connections=_connection_settings(read, multi_tenant=tenancy.enabled),
            security=SecuritySettings.from_env(read),
            tracing=_tracing_settings(read),
            probes=ProbeSettings.from_env(read),
            tenancy=tenancy,
            audit=AuditSettings.from_env(read),
            event_loop=_event_loop(read),
        )


def _connection_settings(env: Environment, *, multi_tenant: bool) -> ConnectionSettings:
    """The SSRF guard is on by default in multi-tenant mode (as the reference's): no tenant
    may reach the service's own network, where the other tenants' data lives."""
    return ConnectionSettings.from_env(
        env,
        ssrf_guard=env.flag("FETCHER_SSRF_GUARD", default=multi_tenant),
        multi_tenant=multi_tenant,
        server_json=env.flag("FETCHER_PG_SERVER_JSON"),
    )
