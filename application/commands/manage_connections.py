"""RegisterConnection and RemoveConnection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from application.ports.clock import Clock, IdGenerator
from application.ports.connection_repository import ConnectionRepository
from application.ports.credential_cipher import CredentialCipher
from domain.connection import (
    SSL_MODES,
    Connection,
    DatabaseType,
    SslSettings,
    is_valid_config_name,
)
from domain.errors import EntityNotFound, InvalidRequest, MissingFields

SUPPORTED_TYPES = frozenset({DatabaseType.POSTGRESQL})


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


_REQUIRED = (
    ("configName", "config_name"),
    ("type", "type"),
    ("host", "host"),
    ("databaseName", "database_name"),
    ("userName", "user_name"),
    ("password", "password"),
)


def _validate(data: ConnectionInput) -> DatabaseType:
    missing = {
        json_name: f"{json_name} is a required field"
        for json_name, attr in _REQUIRED
        if not str(getattr(data, attr) or "").strip()
    }
    if data.ssl_mode is not None or data.ssl_ca is not None:
        if not data.ssl_mode:
            missing["ssl.mode"] = "SSL mode is required"
    if missing:
        raise MissingFields(fields=missing)
    invalid: dict[str, str] = {}
    name = data.config_name.strip()
    if not is_valid_config_name(name):
        invalid["configName"] = (
            "config name can only contain alphanumeric characters, underscores, and hyphens"
        )
    elif not 3 <= len(name) <= 100:
        invalid["configName"] = "config name must be between 3 and 100 characters"
    if not 1 <= data.port <= 65535:
        invalid["port"] = "port must be between 1 and 65535"
    try:
        db_type = DatabaseType(data.type)
    except ValueError:
        invalid["type"] = "type must be one of [ORACLE SQL_SERVER POSTGRESQL MONGODB MYSQL]"
        db_type = None  # type: ignore[assignment]
    if db_type is not None and data.ssl_mode and data.ssl_mode not in SSL_MODES[db_type]:
        invalid["ssl.mode"] = (
            f"FET-0413 - Invalid SSL mode. The provided SSL mode '{data.ssl_mode}' is not "
            "supported. Please use a valid SSL mode for this database type."
        )
    if invalid:
        raise InvalidRequest(
            "The server could not understand the request due to malformed syntax. "
            "Please check the listed fields and try again.",
            code="FET-0001",
            title="Bad Request",
            fields=invalid,
        )
    if db_type not in SUPPORTED_TYPES:
        raise InvalidRequest(
            f"connections of type {db_type.value} are not supported yet",
            code="FET-0001",
            title="Bad Request",
            fields={"type": f"type {db_type.value} is not supported yet"},
        )
    return db_type


@dataclass(slots=True)
class RegisterConnection:
    repository: ConnectionRepository
    cipher: CredentialCipher
    clock: Clock
    ids: IdGenerator

    async def __call__(self, product: str, data: ConnectionInput) -> Connection:
        db_type = _validate(data)
        now = self.clock.now()
        seal = self.cipher.seal
        ssl = None
        if data.ssl_mode:
            ssl = SslSettings(
                mode=data.ssl_mode,
                ca=seal(data.ssl_ca) if data.ssl_ca else None,
                cert=seal(data.ssl_cert) if data.ssl_cert else None,
                key=seal(data.ssl_key) if data.ssl_key else None,
            )
        connection = Connection(
            id=self.ids.new_id(),
            product_name=product,
            config_name=data.config_name.strip(),
            type=db_type,
            host=data.host.strip(),
            port=data.port,
            database_name=data.database_name.strip(),
            user_name=data.user_name.strip(),
            password=seal(data.password),
            schema=data.schema or None,
            ssl=ssl,
            metadata=dict(data.metadata or {}),
            created_at=now,
            updated_at=now,
        )
        await self.repository.add(connection)
        return connection


@dataclass(slots=True)
class RemoveConnection:
    repository: ConnectionRepository
    clock: Clock

    async def __call__(self, connection_id: UUID) -> None:
        if not await self.repository.soft_delete(connection_id, self.clock.now()):
            raise EntityNotFound("connection")
