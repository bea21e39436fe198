"""UpdateConnection: the partial update of reference §2.4.4."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from uuid import UUID

from application.connections.commands.register_connection import ALL_TYPES, sealed_ssl
from application.connections.credential_rotation import reseal
from application.errors import ConnectionInUse
from application.ports.clock import Clock
from application.ports.connection_repository import ConnectionRepository
from application.ports.credential_cipher import CredentialCipher
from application.ports.host_guard import HostGuard
from application.ports.job_index import JobIndex
from application.ports.schema_cache import SchemaCache
from domain import error_catalogue as catalogue
from domain.connection import Connection, DatabaseType
from domain.connection_input import ConnectionInput
from domain.errors import EntityNotFound, InvalidRequest
from domain.tenant import Tenant


@dataclass(slots=True)
class UpdateConnection:
    """Applies a patch to a stored connection of ``tenant`` and bumps its version.

    Order: the sent fields are checked, the connection loaded (404, also for another tenant's),
    the job gate applied (409 FET-1021 while a pending or processing job of the tenant reads
    it), the patch applied and the whole
    connection validated, then written with an optimistic lock. Scalars replace, ``metadata``
    replaces the whole object, an SSL block with a mode replaces the whole stored block (a block
    without a mode changes nothing). A new password is sealed; every secret still sealed under
    an older key version is sealed again under the newest one. The product cannot change here.
    Cached schemas of the connection are dropped.
    """

    repository: ConnectionRepository
    cipher: CredentialCipher
    clock: Clock
    jobs: JobIndex
    cache: SchemaCache | None = None
    guard: HostGuard | None = None
    supported: Collection[DatabaseType] = ALL_TYPES

    async def __call__(
        self, connection_id: UUID, patch: ConnectionInput, *, tenant: Tenant
    ) -> Connection:
        if patch.is_empty:
            raise InvalidRequest(entry=catalogue.EMPTY_BODY)
        patch.check_characters()
        patch.check_metadata()
        patch.check_sent_fields(creating=False)
        if self.guard is not None and patch.host is not None and patch.host.strip():
            self.guard.check_literal(patch.host.strip())
        current = await self.repository.get(connection_id, tenant=tenant)
        if current is None:
            raise EntityNotFound("connection")
        if await self.jobs.is_connection_in_use(current.config_name, tenant=tenant):
            raise ConnectionInUse("cannot update connection with active jobs")
        changed = self._apply(current, patch)
        saved = await self.repository.update(changed)
        if self.cache is not None:
            await self.cache.drop(connection_id, tenant=tenant)
        return saved

    def _apply(self, current: Connection, patch: ConnectionInput) -> Connection:
        drafted = patch.draft(current).connection_fields(self.supported)
        sent_ssl = patch.ssl_to_write
        changed = replace(
            current,
            **drafted,
            schema=(patch.schema or None) if patch.schema is not None else current.schema,
            ssl=sealed_ssl(self.cipher, sent_ssl) if sent_ssl else current.ssl,
            metadata=dict(patch.metadata) if patch.metadata is not None else current.metadata,
            updated_at=self.clock.now(),
            version=current.version + 1,
        )
        if patch.password:
            changed = replace(changed, password=self.cipher.seal(patch.password))
        return reseal(changed, self.cipher)
