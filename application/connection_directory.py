"""Resolving connections by config name or id: internal datasources (from configuration)
first, then stored ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID, uuid5

from application.ports.connection_repository import ConnectionRepository
from domain.connection import Connection

INTERNAL_NAMESPACE = UUID("f47ac10b-58cc-4372-a567-0e02b2c3d479")


def internal_id(config_name: str, tenant: str = "") -> UUID:
    """The deterministic id of an internal datasource: UUIDv5 over ``<tenant>/<configName>``."""
    return uuid5(INTERNAL_NAMESPACE, f"{tenant}/{config_name}")


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

    def internal_by_id(self, connection_id: UUID) -> Connection | None:
        for connection in self.internal.values():
            if connection.id == connection_id:
                return connection
        return None

    async def by_id(self, connection_id: UUID) -> Connection | None:
        """An internal datasource by its deterministic id, else a live stored connection."""
        internal = self.internal_by_id(connection_id)
        if internal is not None:
            return internal
        return await self.repository.get(connection_id)
