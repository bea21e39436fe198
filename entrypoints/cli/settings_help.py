"""The settings each role reads, as ``fetcher <role> --help`` lists them.

One entry per environment variable of ``entrypoints.settings``; a unit test reads the settings
through a recording environment and checks that this table names every variable read, and
nothing else.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

SERVE, API, WORKER, RELAY = "serve", "api", "worker", "relay"
EVERY_ROLE = frozenset({SERVE, API, WORKER, RELAY})
HTTP_ROLES = frozenset({SERVE, API})
STORAGE_ROLES = frozenset({SERVE, API, WORKER})
WORKER_ROLES = frozenset({SERVE, WORKER})
RELAY_ROLES = frozenset({SERVE, RELAY})


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: str
    meaning: str
    roles: frozenset[str]


SETTINGS: tuple[Setting, ...] = (
    Setting("LOG_LEVEL", "info", "debug, info, warning, error or critical", EVERY_ROLE),
    Setting(
        "LOG_FORMAT", "text", "text (key=value fields) or json (one object a line)", EVERY_ROLE
    ),
    Setting(
        "HEALTH_PORT",
        "4007",
        "port of /health, /readyz and /metrics of worker and relay (host of SERVER_ADDRESS)",
        frozenset({WORKER, RELAY}),
    ),
    Setting(
        "READYZ_DRAIN_DELAY_SEC",
        "12",
        "after SIGTERM, seconds /readyz answers 503 draining before the listener closes",
        EVERY_ROLE,
    ),
    Setting("DEPLOYMENT_MODE", "local", "saas, byoc or local, reported by /readyz", EVERY_ROLE),
    Setting(
        "FETCHER_EVENT_LOOP",
        "uvloop (asyncio where uvloop is not installed)",
        "event loop of the role: uvloop, or asyncio (the standard library's) to fall back to",
        EVERY_ROLE,
    ),
    Setting(
        "OTEL_RESOURCE_SERVICE_VERSION",
        "VERSION",
        "version reported by /readyz and on traces",
        EVERY_ROLE,
    ),
    Setting(
        "ENABLE_TELEMETRY",
        "off",
        "true turns tracing on (also on when an OTLP endpoint is set), false off",
        EVERY_ROLE,
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "none",
        "OTLP collector; setting it turns tracing on (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)",
        EVERY_ROLE,
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTLP collector for traces only",
        EVERY_ROLE,
    ),
    Setting("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "grpc or http/protobuf", EVERY_ROLE),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "grpc or http/protobuf, for traces only",
        EVERY_ROLE,
    ),
    Setting("OTEL_INSECURE_EXPORTER", "false", "plaintext gRPC to the collector", EVERY_ROLE),
    Setting("OTEL_TRACES_EXPORTER", "otlp", "otlp, console (standard output) or none", EVERY_ROLE),
    Setting("OTEL_SDK_DISABLED", "false", "true turns tracing off", EVERY_ROLE),
    Setting(
        "OTEL_SERVICE_NAME",
        "fetcher, fetcher-worker or fetcher-relay",
        "service name on traces (or the reference's OTEL_RESOURCE_SERVICE_NAME)",
        EVERY_ROLE,
    ),
    Setting(
        "OTEL_RESOURCE_SERVICE_NAME", "OTEL_SERVICE_NAME", "the reference's name of it", EVERY_ROLE
    ),
    Setting(
        "OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT",
        "none",
        "deployment.environment on traces",
        EVERY_ROLE,
    ),
    Setting(
        "FETCHER_DATA_DIR",
        "./var",
        "data folder of the embedded default (SQLite files, results, events, master key)",
        EVERY_ROLE,
    ),
    Setting(
        "FETCHER_DATABASE_URL",
        "SQLite in the data folder",
        "postgresql://user:pass@host:5432/db: event store, trackings, connections, job index",
        EVERY_ROLE,
    ),
    Setting(
        "APP_ENC_KEY",
        "generated into the data folder by serve only",
        "base64 master key, at least 32 bytes; the four keys are derived from it",
        EVERY_ROLE,
    ),
    Setting("APP_ENC_KEY_VERSION", "1", "version stamped on encrypted credentials", EVERY_ROLE),
    Setting(
        "APP_ENC_KEYS_PREVIOUS",
        "none",
        "older keys still accepted for decryption and verification: <version>:<base64>,...",
        EVERY_ROLE,
    ),
    Setting(
        "FETCHER_AUDIT_CHECKPOINT_EVERY",
        "1000",
        "record a signed audit checkpoint of the event log after this many records",
        RELAY_ROLES,
    ),
    Setting(
        "FETCHER_AUDIT_CHECKPOINT_SECONDS",
        "60",
        "or after this many seconds, when a record came since the last checkpoint",
        RELAY_ROLES,
    ),
    Setting(
        "FETCHER_AUDIT_SIGNING_KEY",
        "derived from APP_ENC_KEY",
        "base64 Ed25519 private key (32-byte seed) that signs audit checkpoints",
        RELAY_ROLES,
    ),
    Setting(
        "RABBITMQ_URL",
        "in-process queue and events.jsonl (serve only)",
        "amqp://user:pass@host:5672/vhost",
        EVERY_ROLE,
    ),
    Setting(
        "RABBITMQ_FETCHER_WORK_QUEUE",
        "fetcher.extract-external-data.queue",
        "work queue, declared with the reference's dead-letter arguments",
        EVERY_ROLE,
    ),
    Setting(
        "RABBITMQ_JOB_EVENTS_EXCHANGE",
        "fetcher.job.events",
        "topic exchange of job.completed and job.failed",
        EVERY_ROLE,
    ),
    Setting(
        "FETCHER_BROKER_DECLARE_TOPOLOGY",
        "on for serve, off for api, worker and relay",
        "true declares the reference topology (work queue, DLX, DLQ, events exchange, the two "
        "example event queues) at start on the vhost of RABBITMQ_URL; false never",
        EVERY_ROLE,
    ),
    Setting(
        "RABBITMQ_NUMBERS_OF_WORKERS", "5", "jobs one worker runs at once (prefetch)", WORKER_ROLES
    ),
    Setting(
        "STREAMING_CLOUDEVENTS_SOURCE",
        "//lerian.fetcher/worker",
        "ce-source of the job events",
        RELAY_ROLES,
    ),
    Setting(
        "OBJECT_STORAGE_BUCKET",
        "none: results in objects/ of the data folder",
        "S3 bucket of the results (it must exist)",
        STORAGE_ROLES,
    ),
    Setting(
        "OBJECT_STORAGE_ENDPOINT",
        "AWS",
        "S3-compatible endpoint URL (MinIO, SeaweedFS, ...)",
        STORAGE_ROLES,
    ),
    Setting("OBJECT_STORAGE_REGION", "us-east-1", "S3 region", STORAGE_ROLES),
    Setting("OBJECT_STORAGE_KEY_PREFIX", "none", "prefix of every object key", STORAGE_ROLES),
    Setting(
        "OBJECT_STORAGE_ACCESS_KEY_ID",
        "the AWS credential chain",
        "static S3 credentials, with OBJECT_STORAGE_SECRET_KEY",
        STORAGE_ROLES,
    ),
    Setting(
        "OBJECT_STORAGE_SECRET_KEY",
        "the AWS credential chain",
        "static S3 credentials, with OBJECT_STORAGE_ACCESS_KEY_ID",
        STORAGE_ROLES,
    ),
    Setting(
        "OBJECT_STORAGE_USE_PATH_STYLE",
        "true with an endpoint",
        "path-style addressing (needed by most S3-compatible servers)",
        STORAGE_ROLES,
    ),
    Setting(
        "ENGINE_MAX_RESULT_BYTES",
        "268435456",
        "result size limit, checked as bytes flow",
        WORKER_ROLES,
    ),
    Setting(
        "ENGINE_TIMEOUT_SECONDS",
        "300",
        "deadline of one job's extraction (reading, sealing, uploading)",
        WORKER_ROLES,
    ),
    Setting(
        "FETCHER_LEASE_SECONDS",
        "20",
        "a claim's lease, renewed by its worker every quarter of it: a dead worker's job is "
        "taken over within about this long (at least 4)",
        WORKER_ROLES,
    ),
    Setting(
        "FETCHER_DEPENDENCY_OUTAGE_SECONDS",
        "120",
        "how long a running job rides out result storage or the database being down before "
        "it fails (storage) or is handed back (database)",
        WORKER_ROLES,
    ),
    Setting(
        "FETCHER_PENDING_TIMEOUT_SECONDS",
        "3600",
        "a job no worker claimed within this fails",
        RELAY_ROLES,
    ),
    Setting(
        "FETCHER_DISPATCH_TIMEOUT_SECONDS",
        "600",
        "a job whose work order could not be published within this fails",
        RELAY_ROLES,
    ),
    Setting(
        "SERVER_ADDRESS",
        "127.0.0.1:4006",
        "API listen address: host:port, :port (every interface) or a port (loopback); "
        "beyond loopback it needs authentication",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_HTTP_HEADER_TIMEOUT_SECONDS",
        "10",
        "time a client has to send a request's headers",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_HTTP_BODY_TIMEOUT_SECONDS",
        "30",
        "time a client has to send a request's body",
        HTTP_ROLES,
    ),
    Setting("VERSION", "0.0.0", "version reported by /version and /readyz", HTTP_ROLES),
    Setting(
        "FETCHER_AUTH_ISSUER",
        "none: no token verification",
        "expected iss; alone, also the OpenID Connect discovery base",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_AUTH_AUDIENCE",
        "none",
        "accepted aud values, comma-separated (required with an issuer)",
        HTTP_ROLES,
    ),
    Setting("FETCHER_AUTH_JWKS_URL", "discovered", "the issuer's key set URL", HTTP_ROLES),
    Setting(
        "FETCHER_AUTH_PUBLIC_KEY",
        "none",
        "one PEM public key (text or file path) instead of a key set",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_AUTH_HS256_SECRET",
        "none",
        "a shared secret of at least 32 bytes instead of keys",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_AUTH_ALGORITHMS",
        "every asymmetric algorithm the key fits",
        "allowed signing algorithms, comma-separated",
        HTTP_ROLES,
    ),
    Setting("FETCHER_AUTH_LEEWAY_SECONDS", "30", "clock skew allowed on exp, nbf, iat", HTTP_ROLES),
    Setting(
        "FETCHER_AUTH_PERMISSIONS_CLAIM",
        "scope",
        "claim granting permissions (dotted path for nested claims)",
        HTTP_ROLES,
    ),
    Setting("FETCHER_AUTH_TENANT_CLAIM", "tenantId", "claim naming the tenant", HTTP_ROLES),
    Setting(
        "PLUGIN_AUTH_ENABLED",
        "false",
        "ask the reference's authorization service for every guarded request",
        HTTP_ROLES,
    ),
    Setting(
        "PLUGIN_AUTH_ADDRESS", "none", "that service's base URL (required when enabled)", HTTP_ROLES
    ),
    Setting(
        "FETCHER_AUTH_DISABLED_INSECURE",
        "false",
        "serve without authentication beyond loopback (warned at every start)",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_CORS_ORIGINS", "none: CORS off", "allowed origins, comma-separated", HTTP_ROLES
    ),
    Setting(
        "SCHEMA_CACHE_TTL_SECONDS",
        "300",
        "how long validate-schema reuses a discovered schema",
        HTTP_ROLES,
    ),
    Setting(
        "CONNECTION_CHECK_CACHE_SECONDS",
        "5",
        "a connection's test that passed this recently stands for a new job's (0: every job)",
        HTTP_ROLES,
    ),
    Setting(
        "CONNECTION_LOOKUP_CACHE_SECONDS",
        "2",
        "how long a connection looked up by name is reused for new jobs (0: every job)",
        HTTP_ROLES,
    ),
    Setting("MAX_PAGINATION_LIMIT", "100", "largest limit of the lists", HTTP_ROLES),
    Setting(
        "FETCHER_DATASOURCE_POOL_SIZE",
        "4",
        "datasource connections kept open per stored connection version and tenant (0: none)",
        STORAGE_ROLES,
    ),
    Setting(
        "FETCHER_PG_SERVER_JSON",
        "false",
        "PostgreSQL builds the result JSON where it writes the same bytes (COPY of row_to_json)",
        frozenset({SERVE, WORKER}),
    ),
    Setting(
        "FETCHER_WORKER_SCHEMA_TTL_SECONDS",
        "10",
        "how long a worker reuses a discovered schema for one connection version (0: never)",
        frozenset({SERVE, WORKER}),
    ),
    Setting(
        "FETCHER_WORKER_CONNECTION_CACHE_SECONDS",
        "1",
        "how long a worker reuses a connection it looked up by name for its jobs (0: every job)",
        frozenset({SERVE, WORKER}),
    ),
    Setting(
        "FETCHER_DATASOURCE_POOL_IDLE_SECONDS",
        "60",
        "how long a kept datasource connection (or an unused pool) stays open",
        STORAGE_ROLES,
    ),
    Setting(
        "MAX_PAGINATION_MONTH_DATE_RANGE",
        "1",
        "widest list window in months, and the default window",
        HTTP_ROLES,
    ),
    Setting(
        "FETCHER_SSRF_GUARD",
        "false",
        "refuse loopback, private and reserved datasource addresses",
        STORAGE_ROLES,
    ),
    Setting(
        "DATASOURCE_<X>_CONFIG_NAME",
        "none",
        "an internal datasource; the same prefix gives _TYPE, _HOST, _DATABASE, _PORT, _USER, "
        "_PASSWORD, _SSLMODE, _SSL_CA, _SSL_CERT, _SSL_KEY, _OPTIONS, _TENANTS",
        STORAGE_ROLES,
    ),
    Setting(
        "MULTI_TENANT_ENABLED",
        "false",
        "multi-tenant mode: the tenant comes from a verified token claim",
        EVERY_ROLE,
    ),
    Setting(
        "MULTI_TENANT_ALLOWED_TENANTS",
        "any tenant",
        "the tenants served, comma-separated (others get 404 Tenant Not Found)",
        EVERY_ROLE,
    ),
)

_NAME_WIDTH = 36
_LINE_WIDTH = 100


def settings_epilog(role: str) -> str:
    """The settings ``role`` reads, one entry each, for the end of its ``--help``."""
    lines = [
        "settings (environment variables; a bad value stops start-up with one line naming it):"
    ]
    indent = " " * (_NAME_WIDTH + 4)
    for setting in SETTINGS:
        if role not in setting.roles:
            continue
        text = f"{setting.meaning} [default: {setting.default}]"
        head = f"  {setting.name:<{_NAME_WIDTH}}  "
        if len(setting.name) > _NAME_WIDTH:
            lines.append(f"  {setting.name}")
            head = indent
        lines.extend(
            textwrap.wrap(text, width=_LINE_WIDTH, initial_indent=head, subsequent_indent=indent)
        )
    return "\n".join(lines)
