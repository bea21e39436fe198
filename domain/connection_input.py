"""What clients send to create or change a connection, and the model rules it must follow
(reference §2.4.1, §2.4.4 and §3.1, with the SSL CA optional: verifying modes fall back to the
system trust store)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

from domain import error_catalogue as catalogue
from domain.connection import SSL_MODES, Connection, DatabaseType, is_valid_config_name
from domain.errors import InvalidFields, MissingFields
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

    @classmethod
    def sent(
        cls, mode: str | None, ca: str | None, cert: str | None, key: str | None
    ) -> SslInput | None:
        """The block a client sent; one whose members are all empty counts as absent."""
        if not any((mode, ca, cert, key)):
            return None
        return cls(mode or "", ca, cert, key)


@dataclass(frozen=True, slots=True)
class ConnectionInput:
    """A connection's editable fields as a client sends them, to create a connection or to
    change one; None means "not sent".

    Applied over a stored connection (a patch), scalars replace, ``metadata`` replaces the whole
    object, an ``ssl`` block with a mode replaces the whole SSL block (one without a mode
    changes nothing) and an empty ``password`` keeps the stored one. A create has nothing to
    apply over, so every required field must be sent, an ``ssl`` block with its mode.
    """

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
        return f"ConnectionInput(config_name={self.config_name!r}, type={self.type!r})"

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    @property
    def ssl_to_write(self) -> SslInput | None:
        """The SSL block this input writes: the one sent, when it carries a mode."""
        return self.ssl if self.ssl is not None and self.ssl.mode else None

    def check_characters(self) -> None:
        """Text with a NUL character cannot be stored or sent to a database: refused per
        field (FET-0001)."""
        ssl = self.ssl
        sent = {
            "configName": self.config_name,
            "type": self.type,
            "host": self.host,
            "databaseName": self.database_name,
            "schema": self.schema,
            "userName": self.user_name,
            "password": self.password,
            "metadata": self.metadata,
            "ssl": [ssl.mode, ssl.ca, ssl.cert, ssl.key] if ssl else None,
        }
        invalid = {
            name: f"{name} must not contain NUL characters"
            for name, value in sent.items()
            if has_nul(value)
        }
        if invalid:
            raise InvalidFields(invalid)

    def check_sent_fields(self) -> None:
        """The format of each field as sent, before anything is loaded (FET-0001)."""
        _check_formats(self.config_name, self.type, self.host, self.port)

    def draft(self, current: Connection | None = None) -> ConnectionDraft:
        """The editable fields, trimmed, that a connection gets from this input: created from
        it alone, or ``current`` with it applied."""
        if current is None:
            ssl_mode = self.ssl.mode if self.ssl is not None else None
        elif self.ssl_to_write is not None:
            ssl_mode = self.ssl_to_write.mode
        else:
            ssl_mode = current.ssl.mode if current.ssl is not None else None
        return ConnectionDraft(
            config_name=_text(self.config_name, current.config_name if current else ""),
            type=_text(self.type, current.type.value if current else ""),
            host=_text(self.host, current.host if current else ""),
            port=self.port if self.port is not None else (current.port if current else 0),
            database_name=_text(self.database_name, current.database_name if current else ""),
            user_name=_text(self.user_name, current.user_name if current else ""),
            has_password=bool(self.password)
            or (current is not None and current.password is not None),
            ssl_mode=ssl_mode,
        )


@dataclass(frozen=True, slots=True)
class ConnectionDraft:
    """A connection's editable fields as they will be stored, before the model rules pass."""

    config_name: str
    type: str
    host: str
    port: int
    database_name: str
    user_name: str
    has_password: bool
    ssl_mode: str | None
    """None when there is no SSL block."""

    def validate(self, supported: Collection[DatabaseType]) -> DatabaseType:
        """The model rules, on a create and after a patch: required fields (FET-0402), then
        formats and the per-engine SSL mode allowlist (FET-0001 with the FET-0413 text under
        ``ssl.mode``), then whether this build reads the engine. Returns the engine."""
        required = {
            "configName": self.config_name,
            "type": self.type,
            "host": self.host,
            "databaseName": self.database_name,
            "userName": self.user_name,
        }
        missing = {
            name: f"{name} is a required field" for name, value in required.items() if not value
        }
        if not self.has_password:
            missing["password"] = "password is a required field"
        if self.ssl_mode == "":
            missing["ssl.mode"] = "SSL mode is required"
        if missing:
            raise MissingFields(fields=dict(sorted(missing.items())))
        _check_formats(self.config_name, self.type, self.host, self.port)
        db_type = DatabaseType[self.type.upper()]
        if self.ssl_mode and self.ssl_mode not in SSL_MODES[db_type]:
            invalid_mode = catalogue.INVALID_SSL_MODE
            raise InvalidFields(
                {"ssl.mode": invalid_mode.cite(invalid_mode.render(mode=self.ssl_mode))}
            )
        if db_type not in supported:
            raise InvalidFields(
                {"type": f"type {db_type.value} is not supported yet"},
                f"connections of type {db_type.value} are not supported yet",
            )
        return db_type


def is_valid_host(host: str) -> bool:
    """A host name (RFC 1123 labels, one trailing dot allowed) or an IP address."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    return 0 < len(name) <= 253 and all(_LABEL.match(label) for label in name.split("."))


def _text(sent: str | None, current: str) -> str:
    return current if sent is None else sent.strip()


def _check_formats(
    config_name: str | None, type_: str | None, host: str | None, port: int | None
) -> None:
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
        raise InvalidFields(invalid)
