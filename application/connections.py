"""Resolving config names to connections and connections to dialable endpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from application.ports.connection_repository import ConnectionRepository
from application.ports.credential_cipher import CredentialCipher
from domain.connection import Connection, Endpoint


@dataclass(slots=True)
class ConnectionDirectory:
    """Internal datasources (from configuration) first, then stored connections."""

    repository: ConnectionRepository
    internal: Mapping[str, Connection] = field(default_factory=dict)

    async def resolve(self, names: Sequence[str]) -> dict[str, Connection]:
        found = {name: self.internal[name] for name in names if name in self.internal}
        missing = [name for name in names if name not in found]
        if missing:
            found.update(await self.repository.by_config_names(missing))
        return found


@dataclass(slots=True)
class EndpointFactory:
    """Opens sealed credentials to build what a datasource adapter dials."""

    cipher: CredentialCipher
    internal_passwords: Mapping[str, str] = field(default_factory=dict)

    def endpoint(self, connection: Connection) -> Endpoint:
        if connection.internal:
            password = self.internal_passwords.get(connection.config_name, "")
        else:
            password = self.cipher.open(connection.password) if connection.password else ""
        ssl = connection.ssl
        return Endpoint(
            type=connection.type,
            host=connection.host,
            port=connection.port,
            database_name=connection.database_name,
            user_name=connection.user_name,
            password=password,
            schema=connection.schema,
            ssl_mode=ssl.mode if ssl else "",
            ssl_ca=self.cipher.open(ssl.ca) if ssl and ssl.ca else None,
            ssl_cert=self.cipher.open(ssl.cert) if ssl and ssl.cert else None,
            ssl_key=self.cipher.open(ssl.key) if ssl and ssl.key else None,
            options=dict(connection.metadata),
        )
