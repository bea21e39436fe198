"""Reading connections: one by id, or a page of them."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from application.connections import ConnectionDirectory
from application.ports.connection_repository import ConnectionPage, ConnectionQuery
from domain.connection import Connection
from domain.errors import EntityNotFound


@dataclass(slots=True)
class GetConnection:
    directory: ConnectionDirectory

    async def __call__(self, connection_id: UUID) -> Connection:
        for connection in self.directory.internal.values():
            if connection.id == connection_id:
                return connection
        found = await self.directory.repository.get(connection_id)
        if found is None:
            raise EntityNotFound("connection")
        return found


@dataclass(slots=True)
class ListConnections:
    directory: ConnectionDirectory

    async def __call__(self, query: ConnectionQuery) -> ConnectionPage:
        page = await self.directory.repository.list(query)
        if query.page != 1:
            return page
        internal = [
            c for c in self.directory.internal.values() if query.type in (None, c.type.value)
        ]
        return ConnectionPage(items=internal + page.items, total=page.total + len(internal))
