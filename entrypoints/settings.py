"""Settings read from the environment once, in the composition root, one object per concern.

Names follow the reference service where the concept is the same. A missing or invalid
required setting raises ``SettingsError`` naming it; ``fetcher`` prints that one line and exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from adapters.common.postgres import PostgresAddress
from domain.tenant import SINGLE_TENANCY, Tenancy, is_valid_tenant_id
from entrypoints.connection_settings import ConnectionSettings, ConnectionSettingsError
from entrypoints.observability_settings import ObservabilitySettingsError, TracingSettings


class SettingsError(Exception):
    pass


def _int(env: Mapping[str, str], name: str, default: int, *, positive: bool = True) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if positive and value <= 0:
        raise SettingsError(f"{name} must be a positive integer, got {raw!r}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "t", "true", "yes", "y", "on"}:
        return True
    if raw in {"0", "f", "false", "no", "n", "off"}:
        return False
    raise SettingsError(f"{name} must be a boolean (true/false), got {raw!r}")


def listen_address(env: Mapping[str, str]) -> tuple[str, int]:
    """``SERVER_ADDRESS``: ``host:port``, ``[ipv6]:port``, ``:port`` (every interface, as the
    reference ships it) or a bare ``port`` (loopback: a port alone never opens the service to
    the network). Default ``127.0.0.1:4006``."""
    raw = env.get("SERVER_ADDRESS", "").strip() or "127.0.0.1:4006"
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
    def from_env(cls, env: Mapping[str, str]) -> HttpSettings:
        host, number = listen_address(env)
        return cls(
            host=host,
            port=number,
            header_timeout_seconds=float(_int(env, "FETCHER_HTTP_HEADER_TIMEOUT_SECONDS", 10)),
            body_timeout_seconds=float(_int(env, "FETCHER_HTTP_BODY_TIMEOUT_SECONDS", 30)),
        )


EventLoop = Literal["uvloop", "asyncio"]


def _event_loop(env: Mapping[str, str]) -> EventLoop:
    """``FETCHER_EVENT_LOOP``: ``uvloop`` or ``asyncio`` (the standard library's loop); unset,
    uvloop where it is installed (it is not on Windows)."""
    name = "FETCHER_EVENT_LOOP"
    raw = env.get(name, "").strip().lower()
    installed = find_spec("uvloop") is not None
    if not raw:
        return "uvloop" if installed else "asyncio"
    if raw == "asyncio":
        return "asyncio"
    if raw != "uvloop":
        raise SettingsError(f"{name} must be uvloop or asyncio, got {raw!r}")
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
    version: str = "unknown"
    """``OTEL_RESOURCE_SERVICE_VERSION`` (else ``VERSION``, else ``unknown``): the version
    ``/readyz`` reports."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProbeSettings:
        port = _int(env, "HEALTH_PORT", DEFAULT_HEALTH_PORT, positive=False)
        drain = _int(env, "READYZ_DRAIN_DELAY_SEC", 0, positive=False)
        mode = env.get("DEPLOYMENT_MODE", "").strip().lower()
        return cls(
            health_port=port if 0 < port < 65536 else DEFAULT_HEALTH_PORT,
            drain_seconds=DEFAULT_DRAIN_SECONDS if drain == 0 else max(drain, 1),
            deployment_mode=mode if mode in DEPLOYMENT_MODES else "local",
            version=env.get("OTEL_RESOURCE_SERVICE_VERSION", "").strip()
            or env.get("VERSION", "").strip()
            or "unknown",
        )


@dataclass(frozen=True, slots=True)
class KeySettings:
    master_key: str | None = field(repr=False)
    version: str
    previous: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KeySettings:
        return cls(
            master_key=env.get("APP_ENC_KEY", "").strip() or None,
            version=env.get("APP_ENC_KEY_VERSION", "").strip() or "1",
            previous=env.get("APP_ENC_KEYS_PREVIOUS", "").strip(),
        )


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

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuditSettings:
        return cls(
            checkpoint_every=_int(env, "FETCHER_AUDIT_CHECKPOINT_EVERY", 1000),
            checkpoint_seconds=_int(env, "FETCHER_AUDIT_CHECKPOINT_SECONDS", 60),
            signing_key=env.get("FETCHER_AUDIT_SIGNING_KEY", "").strip() or None,
        )


def _broker_url(env: Mapping[str, str]) -> str | None:
    raw = env.get("RABBITMQ_URL", "").strip()
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in {"amqp", "amqps"} or not parts.hostname:
        raise SettingsError("RABBITMQ_URL must be an amqp:// or amqps:// URL with a host")
    return raw


def _optional_bool(env: Mapping[str, str], name: str) -> bool | None:
    """A boolean, or ``None`` when unset (the role decides)."""
    return _bool(env, name) if env.get(name, "").strip() else None


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
    def from_env(cls, env: Mapping[str, str]) -> BrokerSettings:
        return cls(
            url=_broker_url(env),
            work_queue=env.get("RABBITMQ_FETCHER_WORK_QUEUE", "").strip()
            or "fetcher.extract-external-data.queue",
            events_exchange=env.get("RABBITMQ_JOB_EVENTS_EXCHANGE", "").strip()
            or "fetcher.job.events",
            cloudevents_source=env.get("STREAMING_CLOUDEVENTS_SOURCE", "").strip()
            or "//lerian.fetcher/worker",
            workers=_int(env, "RABBITMQ_NUMBERS_OF_WORKERS", 5),
            declare_topology=_optional_bool(env, "FETCHER_BROKER_DECLARE_TOPOLOGY"),
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
    def from_env(cls, env: Mapping[str, str]) -> StorageSettings:
        endpoint = env.get("OBJECT_STORAGE_ENDPOINT", "").strip() or None
        if endpoint is not None:
            parts = urlsplit(endpoint)
            if parts.scheme not in {"http", "https"} or not parts.hostname:
                raise SettingsError("OBJECT_STORAGE_ENDPOINT must be an http(s) URL with a host")
        bucket = env.get("OBJECT_STORAGE_BUCKET", "").strip() or None
        if endpoint and not bucket:
            raise SettingsError(
                "OBJECT_STORAGE_BUCKET is required when OBJECT_STORAGE_ENDPOINT is set"
            )
        access = env.get("OBJECT_STORAGE_ACCESS_KEY_ID", "").strip() or None
        secret = env.get("OBJECT_STORAGE_SECRET_KEY", "").strip() or None
        if bool(access) != bool(secret):
            raise SettingsError(
                "OBJECT_STORAGE_ACCESS_KEY_ID and OBJECT_STORAGE_SECRET_KEY must be set together"
            )
        return cls(
            endpoint=endpoint,
            bucket=bucket,
            region=env.get("OBJECT_STORAGE_REGION", "").strip() or "us-east-1",
            key_prefix=env.get("OBJECT_STORAGE_KEY_PREFIX", "").strip(),
            access_key_id=access,
            secret_key=secret,
            path_style=_bool(env, "OBJECT_STORAGE_USE_PATH_STYLE", default=bool(endpoint)),
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
    def from_env(cls, env: Mapping[str, str]) -> EngineSettings:
        raw = env.get("ENGINE_MAX_RESULT_BYTES", "").strip()
        max_bytes = 256 * 1024 * 1024
        if raw:
            try:
                value = int(raw)
            except ValueError:
                raise SettingsError(
                    f"ENGINE_MAX_RESULT_BYTES must be an integer, got {raw!r}"
                ) from None
            if value > 0:
                max_bytes = value
        return cls(
            max_result_bytes=max_bytes,
            timeout_seconds=float(_int(env, "ENGINE_TIMEOUT_SECONDS", 300)),
            parallelism=4,
            pending_timeout_seconds=_int(env, "FETCHER_PENDING_TIMEOUT_SECONDS", 3600),
            lease_seconds=_lease_seconds(env),
            outage_seconds=_int(env, "FETCHER_DEPENDENCY_OUTAGE_SECONDS", 120),
            dispatch_timeout_seconds=_int(env, "FETCHER_DISPATCH_TIMEOUT_SECONDS", 600),
        )


def _lease_seconds(env: Mapping[str, str]) -> int:
    seconds = _int(env, "FETCHER_LEASE_SECONDS", 20)
    if seconds < 4:
        raise SettingsError(f"FETCHER_LEASE_SECONDS must be at least 4, got {seconds}")
    return seconds


ASYMMETRIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
MAX_LEEWAY_SECONDS = 300
MIN_SECRET_BYTES = 32


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in env.get(name, "").split(",") if item.strip())


def _url(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
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
    authentication depends on its listen address; ``entrypoints.security`` decides at start.
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

    @property
    def verifies_tokens(self) -> bool:
        return self.issuer is not None

    @property
    def enabled(self) -> bool:
        return self.verifies_tokens or self.plugin_enabled

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SecuritySettings:
        issuer = _url(env, "FETCHER_AUTH_ISSUER")
        jwks_url = _url(env, "FETCHER_AUTH_JWKS_URL")
        public_key = _pem(env.get("FETCHER_AUTH_PUBLIC_KEY", "").strip())
        secret = env.get("FETCHER_AUTH_HS256_SECRET", "").strip() or None
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
        audience = _list(env, "FETCHER_AUTH_AUDIENCE")
        if issuer is not None and not audience:
            raise SettingsError("FETCHER_AUTH_AUDIENCE is required with FETCHER_AUTH_ISSUER")
        if issuer is None and audience:
            raise SettingsError("FETCHER_AUTH_AUDIENCE needs FETCHER_AUTH_ISSUER")
        plugin = _bool(env, "PLUGIN_AUTH_ENABLED")
        address = _url(env, "PLUGIN_AUTH_ADDRESS")
        if plugin and address is None:
            raise SettingsError("PLUGIN_AUTH_ADDRESS is required when PLUGIN_AUTH_ENABLED=true")
        disabled = _bool(env, "FETCHER_AUTH_DISABLED_INSECURE")
        if disabled and (issuer is not None or plugin):
            raise SettingsError(
                "FETCHER_AUTH_DISABLED_INSECURE=true contradicts the authentication configured"
            )
        leeway = _int(env, "FETCHER_AUTH_LEEWAY_SECONDS", 30, positive=False)
        if not 0 <= leeway <= MAX_LEEWAY_SECONDS:
            raise SettingsError(
                f"FETCHER_AUTH_LEEWAY_SECONDS must be between 0 and {MAX_LEEWAY_SECONDS}"
            )
        return cls(
            issuer=issuer,
            jwks_url=jwks_url,
            public_key=public_key,
            hs256_secret=secret,
            audience=audience,
            algorithms=_algorithms(env, issuer=issuer, secret=secret is not None),
            leeway_seconds=leeway,
            permissions_claim=env.get("FETCHER_AUTH_PERMISSIONS_CLAIM", "").strip() or "scope",
            tenant_claim=env.get("FETCHER_AUTH_TENANT_CLAIM", "").strip() or "tenantId",
            plugin_enabled=plugin,
            plugin_address=address if plugin else None,
            disabled_insecure=disabled,
            cors_origins=_cors_origins(env),
        )


def _algorithms(env: Mapping[str, str], *, issuer: str | None, secret: bool) -> tuple[str, ...]:
    name = "FETCHER_AUTH_ALGORITHMS"
    listed = _list(env, name)
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


def _cors_origins(env: Mapping[str, str]) -> tuple[str, ...]:
    origins = tuple(_origin(item) for item in _list(env, "FETCHER_CORS_ORIGINS"))
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
    def from_env(cls, env: Mapping[str, str]) -> TenancySettings:
        enabled = _bool(env, "MULTI_TENANT_ENABLED")
        name = "MULTI_TENANT_ALLOWED_TENANTS"
        allowed = _list(env, name)
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
    def from_env(cls, env: Mapping[str, str], data_dir: Path) -> DatabaseSettings:
        url = env.get("FETCHER_DATABASE_URL", "").strip()
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
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = Path(env.get("FETCHER_DATA_DIR", "").strip() or "./var").resolve()
        tenancy = TenancySettings.from_env(env)
        return cls(
            data_dir=data_dir,
            database=DatabaseSettings.from_env(env, data_dir),
            http=HttpSettings.from_env(env),
            keys=KeySettings.from_env(env),
            broker=BrokerSettings.from_env(env),
            storage=StorageSettings.from_env(env),
            engine=EngineSettings.from_env(env),
            version=env.get("VERSION", "").strip() or "0.0.0",
            connections=_connection_settings(env, multi_tenant=tenancy.enabled),
            security=SecuritySettings.from_env(env),
            tracing=_tracing_settings(env),
            probes=ProbeSettings.from_env(env),
            tenancy=tenancy,
            audit=AuditSettings.from_env(env),
            event_loop=_event_loop(env),
        )


def _connection_settings(env: Mapping[str, str], *, multi_tenant: bool) -> ConnectionSettings:
    """The SSRF guard is on by default in multi-tenant mode (as the reference's): no tenant
    may reach the service's own network, where the other tenants' data lives."""
    guard = _bool(env, "FETCHER_SSRF_GUARD", default=multi_tenant)
    try:
        return ConnectionSettings.from_env(
            env,
            ssrf_guard=guard,
            multi_tenant=multi_tenant,
            server_json=_bool(env, "FETCHER_PG_SERVER_JSON", default=False),
        )
    except ConnectionSettingsError as error:
        raise SettingsError(str(error)) from None


def _tracing_settings(env: Mapping[str, str]) -> TracingSettings:
    try:
        return TracingSettings.from_env(env)
    except ObservabilitySettingsError as error:
        raise SettingsError(str(error)) from None
