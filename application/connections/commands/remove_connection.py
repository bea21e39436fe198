"""RemoveConnection: soft delete, refused while a job uses the connection (§2.4.5)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from application.errors import ConnectionInUse
from application.ports.clock import Clock
from application.ports.connection_repository import ConnectionRepository
from application.ports.job_index import JobIndex
from application.ports.schema_cache import SchemaCache
from domain.errors import EntityNotFound
from domain.tenant import Tenant


@dataclass(slots=True)
class RemoveConnection:
    """Soft-deletes a stored connection of ``tenant``: 404 (FET-1001) when the tenant has none
    (internal datasources are never stored, so they cannot be deleted), 409 (FET-1021) while
    a pending or processing job of the tenant reads it. Its cached schemas are dropped."""

    repository: ConnectionRepository
    clock: Clock
    jobs: JobIndex
    cache: SchemaCache | None = None

    async def __call__(self, connection_id: UUID, *, tenant: Tenant) -> None:
        current = await self.repository.get(connection_id, tenant=tenant)
        if current is None:
            raise EntityNotFound("connection")
        if await self.jobs.is_connection_in_use(current.config_name, tenant=tenant):
            raise ConnectionInUse("cannot delete connection with active jobs")
        if not await self.repository.soft_delete(connection_id, self.clock.now(), tenant=tenant):
            raise EntityNotFound("connection")
        if self.cache is not None:
            await self.cache.drop(connection_id, tenant=tenant)
