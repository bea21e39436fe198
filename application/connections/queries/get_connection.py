"""Reading one connection by id."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from application.connections.directory import ConnectionDirectory
from domain.connection import Connection
from domain.errors import EntityNotFound
from domain.tenant import Tenant


@dataclass(slots=True)
class GetConnection:
    """An internal datasource by its deterministic id, else a stored connection, among those
    ``tenant`` sees (no product scoping, as in the reference); 404 FET-1001 otherwise."""

    directory: ConnectionDirectory

    async def __call__(self, connection_id: UUID, *, tenant: Tenant) -> Connection:
        found = await self.directory.by_id(connection_id, tenant=tenant)
        if found is None:
            raise EntityNotFound("connection")
        return found
