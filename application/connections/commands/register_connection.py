"""RegisterConnection: validate, seal the credentials, store (reference §2.4.1)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from application.ports.clock import Clock, IdGenerator
from application.ports.connection_repository import ConnectionRepository
from application.ports.credential_cipher import CredentialCipher
from application.ports.host_guard import HostGuard
from domain.connection import Connection, DatabaseType, SslSettings
from domain.connection_input import ConnectionInput, SslInput
from domain.tenant import Tenant

ALL_TYPES = frozenset(DatabaseType)


def sealed_ssl(cipher: CredentialCipher, ssl: SslInput | None) -> SslSettings | None:
    """The SSL block with its CA, certificate and key sealed under the newest key."""
    if ssl is None or not ssl.mode:
        return None
    return SslSettings(
        mode=ssl.mode,
        ca=cipher.seal(ssl.ca) if ssl.ca else None,
        cert=cipher.seal(ssl.cert) if ssl.cert else None,
        key=cipher.seal(ssl.key) if ssl.key else None,
    )


@dataclass(slots=True)
class RegisterConnection:
    """Creates a connection of ``tenant`` owned by ``product`` (already normalised). The
    password and the SSL CA, certificate and key are sealed with the newest key version; the
    connection is not dialled. The request's rules come first, then the host guard (an IP
    literal in a blocked range raises FET-0414 when it is on), then the model's rules; a config
    name already live in the tenant raises FET-1002 (other tenants may use it)."""

    repository: ConnectionRepository
    cipher: CredentialCipher
    clock: Clock
    ids: IdGenerator
    guard: HostGuard | None = None
    supported: Collection[DatabaseType] = ALL_TYPES

    async def __call__(self, product: str, data: ConnectionInput, *, tenant: Tenant) -> Connection:
        data.check_characters()
        data.check_metadata()
        data.check_sent_fields(creating=True)
        draft = data.draft()
        if self.guard is not None:
            self.guard.check_literal(draft.host)
        drafted = draft.connection_fields(self.supported)
        now = self.clock.now()
        connection = Connection(
            id=self.ids.new_id(),
            product_name=product,
            **drafted,
            password=self.cipher.seal(data.password or ""),
            schema=data.schema or None,
            ssl=sealed_ssl(self.cipher, data.ssl_to_write),
            metadata=dict(data.metadata or {}),
            created_at=now,
            updated_at=now,
            tenant=tenant,
        )
        await self.repository.add(connection)
        return connection
