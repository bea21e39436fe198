"""The one table of Fetcher's settings.

Each environment variable is declared once, here: its type and bounds, default, the roles that
read it, the roles that cannot start without it, its concern, whether it is a secret, an example
value and the reference service's name for it. The same entries drive parsing
(``entrypoints.settings_reader.Environment``), ``fetcher <role> --help``,
``docs/reference/configuration.md`` and ``.env.example`` (``entrypoints.cli.settings_docs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

SERVE, API, WORKER, RELAY, TOOLS = "serve", "api", "worker", "relay", "tools"
ROLES = (SERVE, API, WORKER, RELAY)
"""The long-running roles (``fetcher <role>``); ``tools`` stands for the other commands."""
SHARED_ROLES = (API, WORKER, RELAY)
"""The roles of a deployment: they share a database, a broker and keys, so none may fall
back to an embedded default (those are ``fetcher serve``'s alone)."""

Kind = Literal["text", "int", "number", "bool", "list"]
Reader = Literal["fetcher", "otel-sdk"]


class SettingsError(Exception):
    """A missing or invalid setting; each problem is one line naming the variable and what is
    expected, never a secret value."""

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems: tuple[str, ...] = problems or ("invalid settings",)


@dataclass(frozen=True, slots=True)
class Group:
    key: str
    title: str


GROUPS = (
    Group("database", "Database"),
    Group("broker", "Message broker"),
    Group("storage", "Result storage"),
    Group("keys", "Keys"),
    Group("http", "HTTP API"),
    Group("auth", "Authentication and CORS"),
    Group("tenancy", "Tenants"),
    Group("connections", "Connections and datasources"),
    Group("engine", "Jobs and extraction"),
    Group("audit", "Audit trail"),
    Group("probes", "Health, readiness and shutdown"),
    Group("runtime", "Process"),
    Group("logs", "Logs"),
    Group("tools", "Command-line tools"),
    Group("tracing", "Tracing (OpenTelemetry)"),
)
GROUP_TITLES = {group.key: group.title for group in GROUPS}


@dataclass(frozen=True, slots=True)
class Setting:
    """One environment variable."""

    name: str
    help: str
    group: str
    roles: frozenset[str]
    kind: Kind = "text"
    default: str | int | float | bool | None = None
    """The value when unset (``None``: nothing, the feature is off or the text is empty)."""
    shown_default: str = ""
    """How the default reads in help and docs when it is not a plain value."""
    required_for: frozenset[str] = frozenset()
    secret: bool = False
    example: str = ""
    reference: str = ""
    """The reference service's variable: the same name, an alias we also read, or empty."""
    aliases: tuple[str, ...] = ()
    """Other names read, in order, when this one is unset (the reference's spelling)."""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    reader: Reader = "fetcher"
    """``otel-sdk``: the OpenTelemetry SDK reads it itself; listed here for the docs only."""
    essential: bool = False
    """Listed (commented) in ``.env.example`` although optional."""

    @property
    def default_text(self) -> str:
        if self.shown_default:
            return self.shown_default
        if self.default is None or self.default == "":
            return "none"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if isinstance(self.default, float) and self.default.is_integer():
            return str(int(self.default))
        return str(self.default)

    @property
    def expected(self) -> str:
        """What a value must be, for error messages and the docs."""
        low, high = self.minimum, self.maximum
        if self.kind == "bool":
            return "a boolean (true/false)"
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.kind not in ("int", "number"):
            return "text"
        noun = "an integer" if self.kind == "int" else "a number of seconds"
        if low is not None and high is not None:
            return f"{noun} between {low:g} and {high:g}"
        if low == 1 and self.kind == "int":
            return "a positive integer"
        if low is not None:
            return f"{noun} of at least {low:g}"
        return noun


DATASOURCE_KEY = "_CONFIG_NAME"
DATASOURCE_SUFFIXES = (
    "CONFIG_NAME", "TYPE", "HOST", "PORT", "DATABASE", "USER", "PASSWORD", "SSLMODE",
    "SSL_CA", "SSL_CERT", "SSL_KEY", "OPTIONS", "TENANTS",
)  # fmt: skip


def required_for(role: str) -> tuple[Setting, ...]:
    return tuple(s for s in SETTINGS if role in s.required_for)


def roles_reading(setting: Setting) -> tuple[str, ...]:
    return tuple(role for role in (*ROLES, TOOLS) if role in setting.roles)


EVERY_ROLE = frozenset(ROLES)
HTTP_ROLES = frozenset({SERVE, API})
DATASOURCE_ROLES = frozenset({SERVE, API, WORKER})
WORKER_ROLES = frozenset({SERVE, WORKER})
RELAY_ROLES = frozenset({SERVE, RELAY})
STORAGE_ROLES = frozenset({SERVE, WORKER, RELAY, API})
"""Object storage: the worker's results, the relay's audit witnesses (the API reads them
back for the console's Verify)."""
AUDIT_ROLES = frozenset({SERVE, RELAY, TOOLS})
KEY_ROLES = frozenset({*ROLES, TOOLS})
DEPLOYED = frozenset(SHARED_ROLES)
_OTEL = "tracing"


def _same_as_reference(
    name: str, help: str, group: str, roles: frozenset[str], **more: Any
) -> Setting:
    """A setting the reference service reads under the same name."""
    return Setting(name, help, group, roles, reference=name, **more)


# fmt: off
SETTINGS: tuple[Setting, ...] = (
    # --- database
    Setting(
        "FETCHER_DATABASE_URL",
        "the service's database: event store, trackings, connections, job index",
        "database", frozenset({*ROLES, TOOLS}),
        shown_default="SQLite files in the data folder (serve only)",
        required_for=DEPLOYED, secret=True,
        example="postgresql://fetcher:CHANGE-ME@db.internal:5432/fetcher",
    ),
    Setting(
        "FETCHER_DATA_DIR",
        "data folder of the embedded default (SQLite files, results, events, generated key)",
        "database", frozenset({*ROLES, TOOLS}), default="./var", example="/var/lib/fetcher",
    ),
    # --- broker
    Setting(
        "RABBITMQ_URL",
        "the message broker (work orders and job events)",
        "broker", EVERY_ROLE,
        shown_default="in-process queue and events.jsonl (serve only)",
        required_for=DEPLOYED, secret=True,
        example="amqp://fetcher:CHANGE-ME@rabbitmq.internal:5672/",
        reference="RABBITMQ_URI, RABBITMQ_HOST, RABBITMQ_PORT_AMQP, RABBITMQ_DEFAULT_USER, "
        "RABBITMQ_DEFAULT_PASS (one URL here)",
    ),
    _same_as_reference(
        "RABBITMQ_FETCHER_WORK_QUEUE",
        "work queue, declared with the reference's dead-letter arguments",
        "broker", EVERY_ROLE, default="fetcher.extract-external-data.queue",
    ),
    _same_as_reference(
        "RABBITMQ_JOB_EVENTS_EXCHANGE", "topic exchange of job.completed and job.failed",
        "broker", EVERY_ROLE, default="fetcher.job.events",
    ),
    Setting(
        "FETCHER_BROKER_DECLARE_TOPOLOGY",
        "true declares the reference topology (work queue, DLX, DLQ, events exchange, the two "
        "example event queues) at start on the vhost of RABBITMQ_URL; false never",
        "broker", EVERY_ROLE, kind="bool",
        shown_default="on for serve, off for api, worker and relay",
    ),
    _same_as_reference(
        "RABBITMQ_NUMBERS_OF_WORKERS", "jobs one worker runs at once (prefetch)",
        "broker", WORKER_ROLES, kind="int", default=5, minimum=1,
    ),
    _same_as_reference(
        "STREAMING_CLOUDEVENTS_SOURCE", "ce-source of the job events",
        "broker", RELAY_ROLES, default="//lerian.fetcher/worker",
    ),
    # --- storage
    _same_as_reference(
        "OBJECT_STORAGE_BUCKET", "S3 bucket of the results and the audit witnesses (it must exist)",
        "storage", STORAGE_ROLES, shown_default="none: results in objects/ of the data folder",
        required_for=frozenset({WORKER}), example="fetcher-results",
    ),
    _same_as_reference(
        "OBJECT_STORAGE_ENDPOINT", "S3-compatible endpoint URL (MinIO, SeaweedFS, ...)",
        "storage", STORAGE_ROLES, shown_default="AWS", example="https://s3.internal:9000",
        essential=True,
    ),
    _same_as_reference(
        "OBJECT_STORAGE_REGION", "S3 region", "storage", STORAGE_ROLES, default="us-east-1",
    ),
    _same_as_reference(
        "OBJECT_STORAGE_KEY_PREFIX", "prefix of every object key", "storage", STORAGE_ROLES,
    ),
    _same_as_reference(
        "OBJECT_STORAGE_ACCESS_KEY_ID", "static S3 credentials, with OBJECT_STORAGE_SECRET_KEY",
        "storage", STORAGE_ROLES, shown_default="the AWS credential chain", secret=True,
        example="CHANGE-ME", essential=True,
    ),
    _same_as_reference(
        "OBJECT_STORAGE_SECRET_KEY", "static S3 credentials, with OBJECT_STORAGE_ACCESS_KEY_ID",
        "storage", STORAGE_ROLES, shown_default="the AWS credential chain", secret=True,
        example="CHANGE-ME", essential=True,
    ),
    _same_as_reference(
        "OBJECT_STORAGE_USE_PATH_STYLE",
        "path-style addressing (needed by most S3-compatible servers)",
        "storage", STORAGE_ROLES, kind="bool", shown_default="true with an endpoint",
        example="true", essential=True,
    ),
    # --- keys
    _same_as_reference(
        "APP_ENC_KEY",
        "base64 master key, at least 32 bytes; the four keys are derived from it",
        "keys", KEY_ROLES, shown_default="generated into the data folder by serve only",
        required_for=DEPLOYED, secret=True, example="$(openssl rand -base64 32)",
    ),
    _same_as_reference(
        "APP_ENC_KEY_VERSION", "version stamped on encrypted credentials", "keys", KEY_ROLES,
        default="1",
    ),
    Setting(
        "APP_ENC_KEYS_PREVIOUS",
        "older keys still accepted for decryption and verification: <version>:<base64>,...",
        "keys", KEY_ROLES, secret=True, example="1:CHANGE-ME",
    ),
    # --- http
    _same_as_reference(
        "SERVER_ADDRESS",
        "API listen address: host:port, :port (every interface) or a port (loopback); "
        "beyond loopback it needs authentication",
        "http", frozenset({SERVE, API, TOOLS}), default="127.0.0.1:4006", example=":4006",
        essential=True,
    ),
    Setting(
        "FETCHER_HTTP_HEADER_TIMEOUT_SECONDS", "time a client has to send a request's headers",
        "http", HTTP_ROLES, kind="int", default=10, minimum=1,
    ),
    Setting(
        "FETCHER_HTTP_BODY_TIMEOUT_SECONDS", "time a client has to send a request's body",
        "http", HTTP_ROLES, kind="int", default=30, minimum=1,
    ),
    _same_as_reference(
        "VERSION", "the version --version, /version, /readyz and the OpenAPI document report",
        "http", EVERY_ROLE, shown_default="the package's version",
    ),
    _same_as_reference(
        "SCHEMA_CACHE_TTL_SECONDS", "how long validate-schema reuses a discovered schema",
        "http", HTTP_ROLES, kind="int", default=300, minimum=1,
    ),
    _same_as_reference(
        "MAX_PAGINATION_LIMIT", "largest limit of the lists", "http", HTTP_ROLES, kind="int",
        default=100, minimum=1,
    ),
    _same_as_reference(
        "MAX_PAGINATION_MONTH_DATE_RANGE",
        "widest list window in months, and the default window", "http", HTTP_ROLES,
        kind="int", default=1, minimum=1,
    ),
    # --- auth
    Setting(
        "FETCHER_AUTH_ISSUER", "expected iss; alone, also the OpenID Connect discovery base",
        "auth", HTTP_ROLES, shown_default="none: no token verification",
        example="https://id.example.com/realms/fetcher", essential=True,
    ),
    Setting(
        "FETCHER_AUTH_AUDIENCE",
        "accepted aud values, comma-separated (required with an issuer)",
        "auth", HTTP_ROLES, kind="list", example="fetcher", essential=True,
    ),
    Setting(
        "FETCHER_AUTH_JWKS_URL", "the issuer's key set URL", "auth", HTTP_ROLES,
        shown_default="discovered",
    ),
    Setting(
        "FETCHER_CONSOLE_CLIENT_ID",
        "the console's public OpenID Connect client id (sign-in with PKCE at the issuer)",
        "auth", HTTP_ROLES, shown_default="none: the console cannot sign in",
        example="fetcher-console",
    ),
    Setting(
        "FETCHER_AUTH_PUBLIC_KEY", "one PEM public key (text or file path) instead of a key set",
        "auth", HTTP_ROLES,
    ),
    Setting(
        "FETCHER_AUTH_HS256_SECRET", "a shared secret of at least 32 bytes instead of keys",
        "auth", HTTP_ROLES, secret=True,
    ),
    Setting(
        "FETCHER_AUTH_ALGORITHMS", "allowed signing algorithms, comma-separated", "auth",
        HTTP_ROLES, kind="list", shown_default="every asymmetric algorithm the key fits",
    ),
    Setting(
        "FETCHER_AUTH_LEEWAY_SECONDS", "clock skew allowed on exp, nbf, iat", "auth",
        HTTP_ROLES, kind="int", default=30, minimum=0, maximum=300,
    ),
    Setting(
        "FETCHER_AUTH_PERMISSIONS_CLAIM",
        "claim granting permissions (dotted path for nested claims)",
        "auth", HTTP_ROLES, default="scope",
    ),
    Setting(
        "FETCHER_AUTH_TENANT_CLAIM", "claim naming the tenant", "auth", HTTP_ROLES,
        default="tenantId",
    ),
    _same_as_reference(
        "PLUGIN_AUTH_ENABLED",
        "ask the reference's authorization service for every guarded request",
        "auth", HTTP_ROLES, kind="bool", default=False,
    ),
    _same_as_reference(
        "PLUGIN_AUTH_ADDRESS", "that service's base URL (required when enabled)", "auth",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_AUTH_DISABLED_INSECURE",
        "serve without authentication beyond loopback (warned at every start)",
        "auth", HTTP_ROLES, kind="bool", default=False,
    ),
    Setting(
        "FETCHER_CORS_ORIGINS", "allowed origins, comma-separated", "auth", HTTP_ROLES,
        kind="list", shown_default="none: CORS off",
    ),
    # --- tenancy
    _same_as_reference(
        "MULTI_TENANT_ENABLED",
        "multi-tenant mode: the tenant comes from a verified token claim",
        "tenancy", EVERY_ROLE, kind="bool", default=False,
    ),
    Setting(
        "MULTI_TENANT_ALLOWED_TENANTS",
        "the tenants served, comma-separated (others get 404 Tenant Not Found)",
        "tenancy", EVERY_ROLE, kind="list", shown_default="any tenant",
    ),
    # --- connections
    Setting(
        "CONNECTION_CHECK_CACHE_SECONDS",
        "a connection's test that passed this recently stands for a new job's (0: every job)",
        "connections", HTTP_ROLES, kind="number", default=5.0, minimum=0, maximum=3600,
    ),
    Setting(
        "CONNECTION_LOOKUP_CACHE_SECONDS",
        "how long a connection looked up by name is reused for new jobs (0: every job)",
        "connections", HTTP_ROLES, kind="number", default=2.0, minimum=0, maximum=3600,
    ),
    Setting(
        "FETCHER_DATASOURCE_POOL_SIZE",
        "datasource connections kept open per stored connection version and tenant (0: none)",
        "connections", DATASOURCE_ROLES, kind="int", default=4, minimum=0,
    ),
    Setting(
        "FETCHER_DATASOURCE_POOL_IDLE_SECONDS",
        "how long a kept datasource connection (or an unused pool) stays open",
        "connections", DATASOURCE_ROLES, kind="int", default=60, minimum=1,
    ),
    Setting(
        "FETCHER_WORKER_SCHEMA_TTL_SECONDS",
        "how long a worker reuses a discovered schema for one connection version (0: never)",
        "connections", WORKER_ROLES, kind="int", default=10, minimum=0,
    ),
    Setting(
        "FETCHER_WORKER_CONNECTION_CACHE_SECONDS",
        "how long a worker reuses a connection it looked up by name for its jobs (0: every job)",
        "connections", WORKER_ROLES, kind="number", default=1.0, minimum=0, maximum=60,
    ),
    Setting(
        "FETCHER_PG_SERVER_JSON",
        "PostgreSQL builds the result JSON where it writes the same bytes (COPY of row_to_json)",
        "connections", WORKER_ROLES, kind="bool", default=False,
    ),
    _same_as_reference(
        "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM",
        "the CRM plugin's search-hash key: filters on plugin_crm's searched fields "
        "(document, name, contact and banking details) compare HMACs made with it",
        "connections", DATASOURCE_ROLES, secret=True, example="CHANGE-ME",
    ),
    _same_as_reference(
        "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM",
        "the CRM plugin's AES key, hex (32, 48 or 64 digits): reading plugin_crm's "
        "encrypted fields decrypts them with it",
        "connections", DATASOURCE_ROLES, secret=True, example="$(openssl rand -hex 32)",
    ),
    Setting(
        "FETCHER_SSRF_GUARD", "refuse loopback, private and reserved datasource addresses",
        "connections", DATASOURCE_ROLES, kind="bool",
        shown_default="true in multi-tenant mode, else false",
    ),
    _same_as_reference(
        "DATASOURCE_<X>_CONFIG_NAME",
        "an internal datasource; the same prefix gives "
        + ", ".join(f"_{suffix}" for suffix in DATASOURCE_SUFFIXES[1:]),
        "connections", DATASOURCE_ROLES, example="ledger",
    ),
    # --- engine
    _same_as_reference(
        "ENGINE_MAX_RESULT_BYTES", "result size limit, checked as bytes flow (≤ 0: the default)",
        "engine", WORKER_ROLES, kind="int", default=268435456,
    ),
    Setting(
        "ENGINE_TIMEOUT_SECONDS",
        "deadline of one job's extraction (reading, sealing, uploading)",
        "engine", WORKER_ROLES, kind="int", default=300, minimum=1,
    ),
    Setting(
        "FETCHER_LEASE_SECONDS",
        "a claim's lease, renewed by its worker every quarter of it: a dead worker's job is "
        "taken over within about this long",
        "engine", WORKER_ROLES, kind="int", default=20, minimum=4,
    ),
    Setting(
        "FETCHER_DEPENDENCY_OUTAGE_SECONDS",
        "how long a running job rides out result storage or the database being down before "
        "it fails (storage) or is handed back (database)",
        "engine", WORKER_ROLES, kind="int", default=120, minimum=1,
    ),
    Setting(
        "FETCHER_PENDING_TIMEOUT_SECONDS", "a job no worker claimed within this fails",
        "engine", RELAY_ROLES, kind="int", default=3600, minimum=1,
    ),
    Setting(
        "FETCHER_DISPATCH_TIMEOUT_SECONDS",
        "a job whose work order could not be published within this fails",
        "engine", RELAY_ROLES, kind="int", default=600, minimum=1,
    ),
    # --- audit
    Setting(
        "FETCHER_AUDIT_WITNESS",
        "write each audit checkpoint, as it is recorded, to object storage under "
        "audit/checkpoints/ (never overwritten), outside the database: "
        "`fetcher audit verify --witness` and the console's Verify compare with it (a relay, "
        "and an API that compares, need OBJECT_STORAGE_BUCKET; serve uses the data folder)",
        "audit", frozenset({*RELAY_ROLES, API}), kind="bool", default=True,
    ),
    Setting(
        "FETCHER_AUDIT_CHECKPOINT_EVENTS",
        "also publish each audit checkpoint as a signed CloudEvent (routing key "
        "audit.checkpoint) on the events exchange; bind a queue to that key first, as an "
        "unroutable checkpoint is held and retried (and reported in /readyz)",
        "audit", RELAY_ROLES, kind="bool", default=False,
    ),
    Setting(
        "FETCHER_AUDIT_CHECKPOINT_EVERY",
        "record a signed audit checkpoint of the event log after this many records",
        "audit", RELAY_ROLES, kind="int", default=1000, minimum=1,
    ),
    Setting(
        "FETCHER_AUDIT_CHECKPOINT_SECONDS",
        "or after this many seconds, when a record came since the last checkpoint",
        "audit", RELAY_ROLES, kind="int", default=60, minimum=1,
    ),
    Setting(
        "FETCHER_AUDIT_SIGNING_KEY",
        "base64 Ed25519 private key (32-byte seed) that signs audit checkpoints",
        "audit", AUDIT_ROLES, shown_default="derived from APP_ENC_KEY", secret=True,
    ),
    # --- probes
    _same_as_reference(
        "HEALTH_PORT",
        "port of /health, /readyz and /metrics of worker and relay (host of SERVER_ADDRESS); "
        "out of 1-65535: the default",
        "probes", frozenset({WORKER, RELAY, TOOLS}), kind="int", default=4007,
    ),
    _same_as_reference(
        "READYZ_DRAIN_DELAY_SEC",
        "after SIGTERM, seconds /readyz answers 503 draining before the listener closes "
        "(0: the default, negative: 1)",
        "probes", EVERY_ROLE, kind="int", default=12,
    ),
    _same_as_reference(
        "DEPLOYMENT_MODE", "saas, byoc or local (anything else: local), reported by /readyz",
        "probes", EVERY_ROLE, default="local",
    ),
    # --- runtime
    Setting(
        "FETCHER_EVENT_LOOP",
        "event loop of the role: uvloop, or asyncio (the standard library's) to fall back to",
        "runtime", EVERY_ROLE, choices=("uvloop", "asyncio"),
        shown_default="uvloop (asyncio where uvloop is not installed)",
    ),
    # --- logs
    _same_as_reference(
        "LOG_LEVEL", "debug, info, warning, error or critical", "logs",
        frozenset({*ROLES, TOOLS}), default="info",
        choices=("debug", "info", "warn", "warning", "error", "critical", "fatal"),
    ),
    Setting(
        "LOG_FORMAT", "text (key=value fields) or json (one object a line)", "logs",
        frozenset({*ROLES, TOOLS}), default="text", choices=("text", "json"), essential=True,
        example="json",
    ),
    # --- tools
    Setting(
        "FETCHER_EXTERNAL_HMAC_KEY",
        "hex external HMAC key for `fetcher event verify` and `fetcher result decrypt` "
        "(instead of APP_ENC_KEY)",
        "tools", frozenset({TOOLS}), secret=True,
    ),
    Setting(
        "FETCHER_STORAGE_KEY",
        "hex storage key for `fetcher result decrypt` (instead of APP_ENC_KEY)",
        "tools", frozenset({TOOLS}), secret=True,
    ),
    # --- tracing
    _same_as_reference(
        "ENABLE_TELEMETRY",
        "true turns tracing on (also on when an OTLP endpoint is set), false off",
        _OTEL, EVERY_ROLE, kind="bool", shown_default="off",
    ),
    _same_as_reference(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTLP collector; setting it turns tracing on (the exporter reads the value itself)",
        _OTEL, EVERY_ROLE,
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTLP collector for traces only (the exporter reads the value itself)",
        _OTEL, EVERY_ROLE, shown_default="OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc or http/protobuf", _OTEL, EVERY_ROLE,
        default="grpc", choices=("grpc", "http/protobuf"),
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc or http/protobuf, for traces only",
        _OTEL, EVERY_ROLE, shown_default="OTEL_EXPORTER_OTLP_PROTOCOL",
        choices=("grpc", "http/protobuf"),
    ),
    _same_as_reference(
        "OTEL_INSECURE_EXPORTER", "plaintext gRPC to the collector", _OTEL, EVERY_ROLE,
        kind="bool", default=False,
    ),
    Setting(
        "OTEL_TRACES_EXPORTER", "otlp, console (standard output) or none", _OTEL, EVERY_ROLE,
        default="otlp", choices=("otlp", "console", "none"),
    ),
    Setting(
        "OTEL_SDK_DISABLED", "true turns tracing off", _OTEL, EVERY_ROLE, kind="bool",
        default=False,
    ),
    Setting(
        "OTEL_SERVICE_NAME", "service name on traces", _OTEL, EVERY_ROLE,
        shown_default="fetcher, fetcher-worker or fetcher-relay",
        reference="OTEL_RESOURCE_SERVICE_NAME (read too)", aliases=("OTEL_RESOURCE_SERVICE_NAME",),
    ),
    _same_as_reference(
        "OTEL_RESOURCE_SERVICE_VERSION", "version reported by /readyz and on traces", _OTEL,
        EVERY_ROLE, shown_default="VERSION",
    ),
    _same_as_reference(
        "OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT", "deployment.environment on traces", _OTEL,
        EVERY_ROLE,
    ),
    *(
        Setting(name, meaning, _OTEL, EVERY_ROLE, reader="otel-sdk", shown_default="the SDK's")
        for name, meaning in (
            ("OTEL_EXPORTER_OTLP_HEADERS", "headers sent to the collector (key=value,...)"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "export timeout"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "CA certificate of the collector"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip or none"),
            ("OTEL_RESOURCE_ATTRIBUTES", "more resource attributes (key=value,...)"),
            ("OTEL_TRACES_SAMPLER", "sampler (parentbased_always_on, traceidratio, ...)"),
            ("OTEL_TRACES_SAMPLER_ARG", "the sampler's argument (a ratio)"),
            ("OTEL_BSP_SCHEDULE_DELAY", "batch span processor: delay between exports (ms)"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "batch span processor: spans kept at most"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "batch span processor: spans per export"),
        )
    ),
)
# fmt: on

SETTINGS_BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}
