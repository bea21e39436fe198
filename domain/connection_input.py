"""What clients send to create or change a connection, and the rules it must follow (reference
§2.4.1, §2.4.4, §2.2.2 and §3.1).

As in the reference, the rules come in two rounds with two styles of error. The request's own
rules (:meth:`ConnectionInput.check_sent_fields`) name fields as sent (``configName``) in the
validator's words; the connection's model rules (:meth:`ConnectionDraft.validate`) name them
as stored (``config_name``), in the model's words, with ``entity_type`` ``connection``. In each
round a missing field is FET-0402 listing only the missing fields, any other failure FET-0001.
Deliberate differences: the SSL CA is optional (verifying modes fall back to the system trust
store), and a host name is checked against RFC 1123 rather than the older RFC 952 (so a name
may start with a digit).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

from domain import error_catalogue as catalogue
from domain.connection import SSL_MODES, Connection, DatabaseType, is_valid_config_name
from domain.errors import InvalidFields, MissingFields
from domain.json_limits import has_nul, json_problem

_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_TYPES = ("ORACLE", "SQL_SERVER", "POSTGRESQL", "MONGODB", "MYSQL")
ENTITY = "connection"
"""The ``entityType`` of the model rules' errors."""


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

    def check_metadata(self) -> None:
        """``metadata`` is free JSON, read back in Go's form: nested at most 64 levels deep, with
        numbers a float64 holds (FET-0001 naming it; the reference's decoder fails on such a
        number: ``unable to parse request body``)."""
        problem = None if self.metadata is None else json_problem(self.metadata)
        if problem is not None:
            raise InvalidFields({"metadata": f"metadata {problem}"})

    def check_sent_fields(self, *, creating: bool) -> None:
        """The request's own rules, on the fields as sent (before trimming): on a create every
        field but ``schema``, ``ssl`` and ``metadata`` is required (an empty text or port 0 is
        missing) and ``type``, ``host`` and ``port`` must be valid; on a change only what is
        sent and not empty is checked, and ``configName`` must be 3 to 100 characters."""
        sent: dict[str, str | int | None] = {
            "configName": self.config_name,
            "type": self.type,
            "host": self.host,
            "port": self.port,
            "databaseName": self.database_name,
            "userName": self.user_name,
            "password": self.password,
        }
        given = {name: value for name, value in sent.items() if value not in (None, "", 0)}
        if creating:
            missing = {name: f"{name} is a required field" for name in sent if name not in given}
            if missing:
                raise MissingFields(fields=missing)
        invalid: dict[str, str] = {}
        name = given.get("configName")
        if not creating and isinstance(name, str):
            if len(name) < 3:
                invalid["configName"] = "configName must be at least 3 characters in length"
            elif len(name) > 100:
                invalid["configName"] = "configName must be a maximum of 100 characters in length"
        if "type" in given and given["type"] not in _TYPES:
            invalid["type"] = f"type must be one of [{' '.join(_TYPES)}]"
        host = given.get("host")
        if isinstance(host, str) and not is_valid_host(host):
            invalid["host"] = "host must be a valid hostname or IP address"
        port = given.get("port")
        if isinstance(port, int) and port < 1:
            invalid["port"] = "port must be 1 or greater"
        elif isinstance(port, int) and port > 65535:
            invalid["port"] = "port must be 65535 or less"
        if invalid:
            raise InvalidFields(invalid)

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
        """The model rules, on a create and after a patch, with ``entity_type`` ``connection``
        and stored field names: the type first (FET-0001 ``invalid connection type``), then
        the required fields and formats (FET-0402), then lengths and the per-engine SSL mode
        allowlist (FET-0001, the FET-0413 text under ``ssl.mode``), then whether this build
        reads the engine. Returns the engine."""
        kind = self.type.strip().upper()
        if kind not in DatabaseType.__members__:
            raise InvalidFields({"type": "invalid connection type"}, entity_type=ENTITY)
        db_type = DatabaseType[kind]
        required: dict[str, str] = {}
        if not self.config_name:
            required["config_name"] = "config name is required"
        elif not is_valid_config_name(self.config_name):
            required["config_name"] = (
                "config name can only contain alphanumeric characters, underscores, and hyphens"
            )
        if self.port <= 0:
            required["port"] = "port must be a positive integer"
        elif self.port > 65535:
            required["port"] = "port must be between 1 and 65535"
        if not self.host:
            required["host"] = "host is required"
        if not self.database_name:
            required["database_name"] = "database name is required"
        if not self.user_name:
            required["username"] = "username is required"
        if not self.has_password:
            required["password_encrypted"] = "password_encrypted is required"
        if self.ssl_mode == "":
            required["ssl.mode"] = "SSL mode is required"
        if required:
            raise MissingFields(fields=required, entity_type=ENTITY)
        invalid: dict[str, str] = {}
        if not 3 <= len(self.config_name) <= 100:
            invalid["config_name"] = "config name must be between 3 and 100 characters"
        if self.ssl_mode and self.ssl_mode not in SSL_MODES[db_type]:
            invalid_mode = catalogue.INVALID_SSL_MODE
            invalid["ssl.mode"] = invalid_mode.cite(invalid_mode.render(mode=self.ssl_mode))
        if invalid:
            raise InvalidFields(invalid, entity_type=ENTITY)
        if db_type not in supported:
            raise InvalidFields(
                {"type": f"type {db_type.value} is not supported yet"},
                f"connections of type {db_type.value} are not supported yet",
                entity_type=ENTITY,
            )
        return db_type

    def connection_fields(self, supported: Collection[DatabaseType]) -> dict[str, Any]:
        """The model rules (:meth:`validate`), then what the connection takes from this draft:
        its texts and port as drafted and the engine, by the connection's field names."""
        return {
            "type": self.validate(supported),
            "config_name": self.config_name,
            "host": self.host,
            "port": self.port,
            "database_name": self.database_name,
            "user_name": self.user_name,
        }


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
