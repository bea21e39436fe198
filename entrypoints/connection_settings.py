"""Settings of connection management: internal datasources (``DATASOURCE_<X>_*``), the schema
cache, the SSRF guard and list pagination. Read once by ``Settings.from_env``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from domain.connection import SSL_MODES, DatabaseType, is_valid_config_name
from domain.crm import CrmKeys
from domain.tenant import is_valid_tenant_id
from entrypoints.settings_reader import Environment
from entrypoints.settings_table import SettingsError

DEFAULT_PORTS = {
    DatabaseType.POSTGRESQL: 5432,
    DatabaseType.MYSQL: 3306,
    DatabaseType.SQL_SERVER: 1433,
    DatabaseType.ORACLE: 1521,
    DatabaseType.MONGODB: 27017,
}


@dataclass(frozen=True, slots=True)
class InternalDatasource:
    """A datasource the operator configures in the environment (reference §3.6, any name)."""

    config_name: str
    type: DatabaseType
    host: str
    port: int
    database: str
    user: str = ""
    password: str = field(default="", repr=False)
    ssl_mode: str = ""
    ssl_ca: str | None = field(default=None, repr=False)
    ssl_cert: str | None = field(default=None, repr=False)
    ssl_key: str | None = field(default=None, repr=False)
    options: Mapping[str, str] = field(default_factory=dict)
    tenants: frozenset[str] = frozenset()
    """``_TENANTS``: the tenants that see it in multi-tenant mode (none: no tenant)."""


def _options(prefix: str, raw: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in raw.split("&"):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{prefix}_OPTIONS must be k=v pairs joined by '&'")
        options[key.strip()] = value.strip()
    return options


def _tenants(prefix: str, raw: str) -> frozenset[str]:
    listed = [item.strip() for item in raw.split(",") if item.strip()]
    for item in listed:
        if not is_valid_tenant_id(item):
            raise SettingsError(
                f"{prefix}_TENANTS: {item!r} is not a tenant id (1 to 64 letters, digits, '_' "
                "or '-', starting with a letter or a digit)"
            )
    return frozenset(listed)


def _internal(env: Environment, prefix: str) -> InternalDatasource:
    def get(suffix: str) -> str:
        return env.datasource(prefix, suffix)

    name = get("CONFIG_NAME")
    if not is_valid_config_name(name) or not 3 <= len(name) <= 100:
        raise SettingsError(f"{prefix}_CONFIG_NAME must be 3-100 letters, digits, '_' or '-'")
    kind = get("TYPE").upper()
    if kind not in DatabaseType.__members__:
        raise SettingsError(
            f"{prefix}_TYPE must be one of postgresql, mysql, oracle, sql_server, mongodb"
        )
    db_type = DatabaseType[kind]
    for suffix in ("HOST", "DATABASE"):
        if not get(suffix):
            raise SettingsError(f"{prefix}_{suffix} is required")
    port = env.datasource_port(prefix, DEFAULT_PORTS[db_type])
    ssl_mode = get("SSLMODE")
    if ssl_mode and ssl_mode not in SSL_MODES[db_type]:
        allowed = ", ".join(sorted(SSL_MODES[db_type]))
        raise SettingsError(f"{prefix}_SSLMODE must be one of {allowed}")
    return InternalDatasource(
        config_name=name,
        type=db_type,
        host=get("HOST"),
        port=port,
        database=get("DATABASE"),
        user=get("USER"),
        password=env.datasource(prefix, "PASSWORD", strip=False),
        ssl_mode=ssl_mode,
        ssl_ca=env.datasource(prefix, "SSL_CA", strip=False) or None,
        ssl_cert=env.datasource(prefix, "SSL_CERT", strip=False) or None,
        ssl_key=env.datasource(prefix, "SSL_KEY", strip=False) or None,
        options=_options(prefix, get("OPTIONS")),
        tenants=_tenants(prefix, get("TENANTS")),
    )


def internal_datasources(env: Environment) -> tuple[InternalDatasource, ...]:
    """Every ``DATASOURCE_<X>_CONFIG_NAME`` entry, in variable-name order. Entries with an
    empty config name are ignored; an invalid entry or a repeated config name is an error."""
    found: dict[str, InternalDatasource] = {}
    for variable, prefix in env.datasource_prefixes():
        datasource = _internal(env, prefix)
        if datasource.config_name in found:
            raise SettingsError(
                f"{variable}: config name '{datasource.config_name}' is configured twice"
            )
        found[datasource.config_name] = datasource
    return tuple(found.values())


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    schema_cache_ttl_seconds: int = 300
    check_cache_seconds: float = 5.0
    """``CONNECTION_CHECK_CACHE_SECONDS``: a connectivity test that passed this recently (same
    tenant, connection and version) stands for a new job's own; 0 tests for every job."""
    lookup_cache_seconds: float = 2.0
    """``CONNECTION_LOOKUP_CACHE_SECONDS``: how long the API reuses a connection it looked up
    by name for a new job (per tenant); writes through the API forget at once, other
    processes' writes are seen within this window; 0 reads the repository for every job."""
    ssrf_guard: bool = False
    """``FETCHER_SSRF_GUARD``: refuse internal and private destinations (on by default in
    multi-tenant mode)."""
    max_pagination_limit: int = 100
    max_pagination_months: int = 1
    internal: tuple[InternalDatasource, ...] = ()
    multi_tenant: bool = False
    pool_size: int = 4
    """``FETCHER_DATASOURCE_POOL_SIZE``: open connections kept per stored connection version (per
    tenant); 0 opens and closes one for every use."""
    pool_idle_seconds: int = 60
    """``FETCHER_DATASOURCE_POOL_IDLE_SECONDS``: how long a kept connection may stay unused."""
    server_json: bool = False
    """``FETCHER_PG_SERVER_JSON``: PostgreSQL builds the result JSON of the tables whose types
    it writes byte for byte as the Python encoder does (``COPY`` of ``row_to_json``). Off by
    default: measured slower than encoding in the worker (benchmarks/README.md)."""
    worker_schema_ttl_seconds: int = 10
    """``FETCHER_WORKER_SCHEMA_TTL_SECONDS``: how long a worker reuses a discovered schema for
    the jobs of one connection version; 0 discovers for every job."""
    crm_keys: CrmKeys = field(default_factory=CrmKeys)
    """``CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM`` and ``CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM``: the
    CRM plugin's keys, for the ``plugin_crm`` datasource."""
    worker_lookup_cache_seconds: float = 1.0
    """``FETCHER_WORKER_CONNECTION_CACHE_SECONDS``: how long a worker reuses a connection it
    looked up by name for the jobs it runs (per tenant); edits and deletions made elsewhere
    reach its jobs within this window (in a process that also serves the API, those made
    through it at once); 0 reads the repository for every job; at most 60."""
    """Internal datasources are then seen only by the tenants each lists (``_TENANTS``)."""

    def internal_visibility(self) -> dict[str, frozenset[str]] | None:
        """Who sees each internal datasource: None in single-tenant mode (the single tenant
        sees every one), else the tenants each lists."""
        if not self.multi_tenant:
            return None
        return {datasource.config_name: datasource.tenants for datasource in self.internal}

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | Environment,
        *,
        ssrf_guard: bool,
        multi_tenant: bool = False,
        server_json: bool = False,
    ) -> ConnectionSettings:
        read = Environment.of(env)
        return cls(
            schema_cache_ttl_seconds=read.integer("SCHEMA_CACHE_TTL_SECONDS"),
            check_cache_seconds=read.number("CONNECTION_CHECK_CACHE_SECONDS"),
            lookup_cache_seconds=read.number("CONNECTION_LOOKUP_CACHE_SECONDS"),
            ssrf_guard=ssrf_guard,
            max_pagination_limit=read.integer("MAX_PAGINATION_LIMIT"),
            max_pagination_months=read.integer("MAX_PAGINATION_MONTH_DATE_RANGE"),
            internal=internal_datasources(read),
            multi_tenant=multi_tenant,
            server_json=server_json,
            pool_size=read.integer("FETCHER_DATASOURCE_POOL_SIZE"),
            pool_idle_seconds=read.integer("FETCHER_DATASOURCE_POOL_IDLE_SECONDS"),
            worker_schema_ttl_seconds=read.integer("FETCHER_WORKER_SCHEMA_TTL_SECONDS"),
            worker_lookup_cache_seconds=read.number("FETCHER_WORKER_CONNECTION_CACHE_SECONDS"),
            crm_keys=CrmKeys(
                hash_key=(read.optional("CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM") or "").encode()
                or None,
                encrypt_key=_crm_encrypt_key(read),
            ),
        )


def _crm_encrypt_key(read: Environment) -> bytes | None:
    name = "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM"
    raw = read.optional(name)
    if not raw:
        return None
    try:
        key = bytes.fromhex(raw.strip())
    except ValueError:
        raise SettingsError(
            f"{name} must be hexadecimal (an AES key of 16, 24 or 32 bytes)"
        ) from None
    if len(key) not in (16, 24, 32):
        raise SettingsError(
            f"{name} must be 32, 48 or 64 hexadecimal digits (an AES key of 16, 24 or 32 "
            f"bytes), got {len(raw.strip())} digits"
        )
    return key
