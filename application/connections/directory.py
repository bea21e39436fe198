"""Resolving connections by config name or id, within one tenant: internal datasources (from
configuration) first, then stored ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from uuid import UUID, uuid5

from application.ports.connection_repository import ConnectionRepository
from domain.connection import Connection
from domain.tenant import Tenant

INTERNAL_NAMESPACE = UUID("f47ac10b-58cc-4372-a567-0e02b2c3d479")


def internal_id(config_name: str, tenant: str = "") -> UUID:
    """The deterministic id of an internal datasource: UUIDv5 over ``<tenant>/<configName>``."""
    return uuid5(INTERNAL_NAMESPACE, f"{tenant}/{config_name}")


@dataclass(slots=True)
class ConnectionDirectory:
    """Internal datasources (from configuration) first, then stored connections, as one
    tenant sees them.

    ``internal`` holds the internal datasources by config name (their ids those of the single
    tenant). ``visible_to`` says which tenants see each in multi-tenant mode: None means
    single-tenant mode, where the single tenant sees them all; otherwise a datasource is seen
    only by the tenants listed for it (none listed: by no tenant), under the tenant's own
    deterministic id, and the single tenant sees none.
    """

    repository: ConnectionRepository
    internal: Mapping[str, Connection] = field(default_factory=dict)
    visible_to: Mapping[str, frozenset[str]] | None = None

    def internal_for(self, tenant: Tenant) -> dict[str, Connection]:
        """The internal datasources ``tenant`` sees, by config name."""
        if self.visible_to is None:
            return dict(self.internal) if tenant.is_single else {}
        if tenant.is_single:
            return {}
        return {
            name: replace(connection, id=internal_id(name, tenant.id), tenant=tenant)
            for name, connection in self.internal.items()
            if tenant.id in self.visible_to.get(name, frozenset())
        }

    async def resolve(self, names: Sequence[str], *, tenant: Tenant) -> dict[str, Connection]:
        internal = self.internal_for(tenant)
        found = {name: internal[name] for name in names if name in internal}
        missing = [name for name in names if name not in found]
        if missing:
            found.update(await self.repository.by_config_names(missing, tenant=tenant))
        return found

    def internal_by_id(self, connection_id: UUID, *, tenant: Tenant) -> Connection | None:
        for connection in self.internal_for(tenant).values():
            if connection.id == connection_id:
                return connection
        return None

    async def by_id(self, connection_id: UUID, *, tenant: Tenant) -> Connection | None:
        """An internal datasource by its deterministic id, else a live stored connection."""
        internal = self.internal_by_id(connection_id, tenant=tenant)
        if internal is not None:
            return internal
        return await self.repository.get(connection_id, tenant=tenant)
