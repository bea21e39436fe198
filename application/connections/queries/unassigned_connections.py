"""ListUnassignedConnections: stored connections without a product (reference §2.4.9)."""

from __future__ import annotations

from dataclasses import dataclass

from application.connections.queries.list_connections import ListFilter, stored_query
from application.ports.clock import Clock
from application.ports.connection_repository import ConnectionPage, ConnectionRepository
from domain.tenant import Tenant


@dataclass(slots=True)
class ListUnassignedConnections:
    """Like the connection list of ``tenant`` (same date window, pagination and filters) but
    only connections whose product is empty, and never the internal datasources."""

    repository: ConnectionRepository
    clock: Clock
    max_months: int = 1

    async def __call__(self, wanted: ListFilter, *, tenant: Tenant) -> ConnectionPage:
        return await self.repository.list(
            stored_query(wanted, self.clock, self.max_months, unassigned=True), tenant=tenant
        )
