"""What clients send to create or change a connection, and the rules it must follow
(reference §2.4.1, §2.4.4 and §3.1, with the SSL CA optional: verifying modes fall back to the
system trust store)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

from application.ports.host_guard import HostGuard
from domain import error_catalogue as catalogue
from domain.connection import SSL_MODES, DatabaseType, is_valid_config_name
from domain.errors import InvalidFields, InvalidRequest, MissingFields
from domain.json_limits import has_nul

_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_TYPES = "[ORACLE SQL_SERVER POSTGRESQL MONGODB MYSQL]"


@dataclass(frozen=True, slots=True)
class SslInput:
    """An SSL block as sent: the mode and the PEM texts (never printed)."""

    mode: str = ""
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __repr__(self) -> str:
        return f"SslInput(mode={self.mode!r})"


@dataclass(frozen=True, slots=True)
class ConnectionInput:
    config_name: str
    type: str
    host: str
    port: int
    database_name: str
    user_name: str
    password: str
    schema: str | None = None
    ssl_mode: str | None = None
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    metadata: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ConnectionInput(config_name={self.config_name!r}, type={self.type!r})"

    @property
    def ssl(self) -> SslInput | None:
        if self.ssl_mode is None and self.ssl_ca is None:
            return None
        return SslInput(self.ssl_mode or "", self.ssl_ca, self.ssl_cert, self.ssl_key)


@dataclass(frozen=True, slots=True)
class ConnectionPatch:
    """A partial update: None means "not sent". ``ssl`` replaces the whole SSL block, and only
    when it carries a mode; ``metadata`` replaces the whole object; an empty ``password``
    leaves the stored one."""

    config_name: str | None = None
    type: str | None = None
    host: str | None = None
    port: int | None = None
    database_name: str | None = None
    schema: str | None = None
    user_name: str | None = None
    password: str | None = None
    ssl: SslInput | None = None
    metadata: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ConnectionPatch(config_name={self.config_name!r})"

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))


def is_valid_host(host: str) -> bool:
    """A host name (RFC 1123 labels, one trailing dot allowed) or an IP address."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    return 0 < len(name) <= 253 and all(_LABEL.match(label) for label in name.split("."))


def bad_request(invalid: dict[str, str]) -> InvalidRequest:
    return InvalidFields(invalid)


def check_no_nul(fields: Mapping[str, Any]) -> None:
    """Text with a NUL character cannot be stored or sent to a database: refused per field."""
    invalid = {
        name: f"{name} must not contain NUL characters"
        for name, value in fields.items()
        if has_nul(value)
    }
    if invalid:
        raise bad_request(invalid)


def check_sent_fields(
    *,
    config_name: str | None,
    type_: str | None,
    host: str | None,
    port: int | None,
    guard: HostGuard | None,
) -> None:
    """The checks that apply to each field as sent (before anything is loaded)."""
    invalid: dict[str, str] = {}
    if config_name is not None and config_name.strip():
        name = config_name.strip()
        if not is_valid_config_name(name):
            invalid["configName"] = (
                "config name can only contain alphanumeric characters, underscores, and hyphens"
            )
        elif not 3 <= len(name) <= 100:
            invalid["configName"] = "config name must be between 3 and 100 characters"
    kind = (type_ or "").strip().upper()
    if kind and kind not in DatabaseType.__members__:
        invalid["type"] = f"type must be one of {_TYPES}"
    if host is not None and host.strip() and not is_valid_host(host.strip()):
        invalid["host"] = "host must be a valid hostname or IP address"
    if port is not None and not 1 <= port <= 65535:
        invalid["port"] = "port must be between 1 and 65535"
    if invalid:
        raise bad_request(invalid)
    if guard is not None and host is not None and host.strip():
        guard.check_literal(host.strip())


@dataclass(frozen=True, slots=True)
class Draft:
    """A connection's editable fields as they will be stored."""

    config_name: str
    type: str
    host: str
    port: int
    database_name: str
    user_name: str
    has_password: bool
    ssl_mode: str | None
    """None when there is no SSL block."""


def validate_draft(draft: Draft, supported: Collection[DatabaseType]) -> DatabaseType:
    """The model rules: required fields (FET-0402), then formats and the per-engine SSL mode
    allowlist (FET-0001 with the FET-0413 text under ``ssl.mode``)."""
    required = {
        "configName": draft.config_name,
        "type": draft.type,
        "host": draft.host,
        "databaseName": draft.database_name,
        "userName": draft.user_name,
    }
    missing = {name: f"{name} is a required field" for name, value in required.items() if not value}
    if not draft.has_password:
        missing["password"] = "password is a required field"
    if draft.ssl_mode == "":
        missing["ssl.mode"] = "SSL mode is required"
    if missing:
        raise MissingFields(fields=dict(sorted(missing.items())))
    check_sent_fields(
        config_name=draft.config_name,
        type_=draft.type,
        host=draft.host,
        port=draft.port,
        guard=None,
    )
    db_type = DatabaseType[draft.type.upper()]
    if draft.ssl_mode and draft.ssl_mode not in SSL_MODES[db_type]:
        invalid_mode = catalogue.INVALID_SSL_MODE
        raise bad_request({"ssl.mode": invalid_mode.cite(invalid_mode.render(mode=draft.ssl_mode))})
    if db_type not in supported:
        raise InvalidFields(
            {"type": f"type {db_type.value} is not supported yet"},
            f"connections of type {db_type.value} are not supported yet",
        )
    return db_type
