"""Connection value objects: engine types, SSL modes, product names, the sealed credential and
the plaintext credentials of an internal datasource."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

from domain import error_catalogue as catalogue
from domain.errors import InvalidRequest
from domain.tenant import SINGLE_TENANT, Tenant


class DatabaseType(Enum):
    POSTGRESQL = "POSTGRESQL"
    MYSQL = "MYSQL"
    SQL_SERVER = "SQL_SERVER"
    ORACLE = "ORACLE"
    MONGODB = "MONGODB"


SSL_MODES: Mapping[DatabaseType, frozenset[str]] = {
    DatabaseType.POSTGRESQL: frozenset(
        {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}
    ),
    DatabaseType.MYSQL: frozenset({"false", "true", "skip-verify", "preferred"}),
    DatabaseType.ORACLE: frozenset({"disable", "false", "true", "enable", "verify", "skip-verify"}),
    DatabaseType.SQL_SERVER: frozenset({"disable", "false", "true", "strict"}),
    DatabaseType.MONGODB: frozenset({"disable", "false", "true", "enable", "insecure"}),
}

DEFAULT_SCHEMA: Mapping[DatabaseType, str] = {
    DatabaseType.POSTGRESQL: "public",
    DatabaseType.SQL_SERVER: "dbo",
}

_PRODUCT_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_CONFIG_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


class InvalidHeader(InvalidRequest):
    entry = catalogue.INVALID_HEADER


def normalise_product(raw: str | None, *, required: bool) -> str | None:
    """Trim, lower-case and validate an ``X-Product-Name`` value (reference §2.1.2)."""
    if raw is None:
        if required:
            raise InvalidHeader("X-Product-Name header is required and must not be empty")
        return None
    value = raw.strip()
    if not value:
        if required:
            raise InvalidHeader("X-Product-Name header is required and must not be empty")
        raise InvalidHeader("X-Product-Name header must not be empty or whitespace-only")
    value = value.lower()
    if len(value) > 100:
        raise InvalidHeader("X-Product-Name must not exceed 100 characters")
    if not _PRODUCT_RE.match(value):
        raise InvalidHeader(
            "X-Product-Name can only contain alphanumeric characters, underscores, and hyphens"
        )
    return value


def normalise_source(source: str) -> str:
    """``metadata.source`` is compared with product names after the same normalisation."""
    return source.strip().lower()


def is_valid_config_name(name: str) -> bool:
    return bool(_CONFIG_RE.match(name))


@dataclass(frozen=True, slots=True)
class SealedSecret:
    """A secret encrypted at rest: base64(nonce || ciphertext || tag) and the key version."""

    ciphertext: str
    key_version: str

    def __repr__(self) -> str:
        return f"SealedSecret(key_version={self.key_version!r})"


@dataclass(frozen=True, slots=True)
class SslSettings:
    mode: str = ""
    ca: SealedSecret | None = None
    cert: SealedSecret | None = None
    key: SealedSecret | None = None


@dataclass(frozen=True, slots=True)
class InternalCredentials:
    """The password and TLS material of an internal datasource, in plaintext as the operator
    configured them. They live only in memory: never stored, returned or printed."""

    password: str = ""
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None

    def __repr__(self) -> str:
        return "InternalCredentials(...)"


@dataclass(frozen=True, slots=True)
class Connection:
    """A registered datasource connection of one tenant. The password is only ever held
    sealed, except for an internal datasource (configured, never stored), which carries its
    credentials as configured in ``internal_credentials``."""

    id: UUID
    product_name: str
    config_name: str
    type: DatabaseType
    host: str
    port: int
    database_name: str
    user_name: str
    password: SealedSecret | None
    schema: str | None = None
    ssl: SslSettings | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    internal: bool = False
    version: int = 1
    internal_credentials: InternalCredentials | None = field(default=None, repr=False)
    tenant: Tenant = SINGLE_TENANT
    """Whose connection it is; its config name is unique among the tenant's live ones."""

    def __post_init__(self) -> None:
        if self.internal_credentials is not None and not self.internal:
            raise ValueError("only an internal datasource carries plaintext credentials")


@dataclass(frozen=True, slots=True)
class ConnectionIdentity:
    """Which stored connection, at which version, of which tenant an endpoint was built from.
    Adapters may share an open datasource connection only between endpoints of one identity (a
    changed password or host comes with a new version; tenants never share)."""

    tenant: Tenant
    connection_id: UUID
    version: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What a datasource adapter needs to dial: credentials in plaintext, never printed.
    ``identity`` names the stored connection it was built from; None for one not stored (a
    connection being tested before it is registered), which is never pooled."""

    type: DatabaseType
    host: str
    port: int
    database_name: str
    user_name: str
    password: str = field(repr=False)
    schema: str | None = None
    ssl_mode: str = ""
    ssl_ca: str | None = field(default=None, repr=False)
    ssl_cert: str | None = field(default=None, repr=False)
    ssl_key: str | None = field(default=None, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    identity: ConnectionIdentity | None = None
    plugin_crm: bool = False
    """Read through the CRM plugin's compatibility path (``domain.crm``)."""
