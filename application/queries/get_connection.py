"""Reading one connection by id."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from application.connection_directory import ConnectionDirectory
from domain.connection import Connection
from domain.errors import EntityNotFound


@dataclass(slots=True)
class GetConnection:
    """An internal datasource by its deterministic id, else a stored connection (no product
    scoping, as in the reference); 404 FET-1001 otherwise."""

    directory: ConnectionDirectory

    async def __call__(self, connection_id: UUID) -> Connection:
        found = await self.directory.by_id(connection_id)
        if found is None:
            raise EntityNotFound("connection")
        return found
