"""In-process twin of the connection repository, for unit tests."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from uuid import UUID

from application.ports.connection_repository import (
    ConnectionPage,
    ConnectionQuery,
    ConnectionRepository,
)
from domain.connection import Connection
from domain.errors import ConcurrencyConflict, EntityConflict, EntityNotFound, Unavailable
from domain.tenant import Tenant


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass
class _Row:
    connection: Connection
    deleted_at: datetime | None = None


class InMemoryConnectionRepository(ConnectionRepository):
    """Same semantics as ``SqlaConnectionRepository``: every call within one tenant, unique
    live config names per tenant (FET-1002), soft deletes, optimistic ``update``, conditional
    ``assign_product``, UTC datetimes.
    Set ``unavailable = True`` to make every call raise ``Unavailable``."""

    def __init__(self) -> None:
        self._rows: dict[UUID, _Row] = {}
        self.unavailable = False

    def _guard(self) -> None:
        if self.unavailable:
            raise Unavailable()

    def _live(self, tenant: Tenant) -> list[Connection]:
        return [
            r.connection
            for r in self._rows.values()
            if r.deleted_at is None and r.connection.tenant == tenant
        ]

    def _row(self, connection_id: UUID, tenant: Tenant) -> _Row | None:
        """The tenant's row with that id, live or deleted (another tenant's is no row)."""
        row = self._rows.get(connection_id)
        return row if row is not None and row.connection.tenant == tenant else None

    def _name_taken(self, name: str, tenant: Tenant, except_id: UUID | None = None) -> bool:
        return any(c.config_name == name and c.id != except_id for c in self._live(tenant))

    async def create_schema(self) -> None:
        self._guard()

    async def close(self) -> None:
        return None

    async def check(self) -> None:
        self._guard()

    async def add(self, connection: Connection) -> None:
        self._guard()
        if connection.created_at is None:
            raise ValueError("a stored connection needs created_at")
        if connection.id in self._rows or self._name_taken(
            connection.config_name, connection.tenant
        ):
            raise EntityConflict("connection", field="configName", value=connection.config_name)
        self._rows[connection.id] = _Row(_normalised(connection, connection.created_at))

    async def get(self, connection_id: UUID, *, tenant: Tenant) -> Connection | None:
        self._guard()
        row = self._row(connection_id, tenant)
        return _copy(row.connection) if row and row.deleted_at is None else None

    async def by_config_names(
        self, names: Sequence[str], *, tenant: Tenant
    ) -> dict[str, Connection]:
        self._guard()
        wanted = set(names)
        return {c.config_name: _copy(c) for c in self._live(tenant) if c.config_name in wanted}

    async def list(self, query: ConnectionQuery, *, tenant: Tenant) -> ConnectionPage:
        self._guard()
        matching = [c for c in self._live(tenant) if _matches(c, query)]
        matching.sort(key=lambda c: (c.created_at, c.id), reverse=query.descending)
        limit = max(query.limit, 0)
        start = (max(query.page, 1) - 1) * limit
        items = [_copy(c) for c in matching[start : start + limit]]
        return ConnectionPage(items=items, total=len(matching))

    async def soft_delete(self, connection_id: UUID, now: datetime, *, tenant: Tenant) -> bool:
        self._guard()
        row = self._row(connection_id, tenant)
        if row is None or row.deleted_at is not None:
            return False
        now = _utc(now)
        row.deleted_at = now
        ssl = row.connection.ssl
        row.connection = replace(
            row.connection,
            password=None,
            ssl=replace(ssl, ca=None, cert=None, key=None) if ssl else None,
            updated_at=now,
            version=row.connection.version + 1,
        )
        return True

    def stored(self, connection_id: UUID) -> Connection | None:
        """The row as stored, deleted or not (for tests: reads never see deleted rows)."""
        row = self._rows.get(connection_id)
        return _copy(row.connection) if row else None

    async def update(self, connection: Connection) -> Connection:
        self._guard()
        if connection.updated_at is None:
            raise ValueError("an updated connection needs updated_at")
        row = self._row(connection.id, connection.tenant)
        if row is None or row.deleted_at is not None:
            raise EntityNotFound("connection")
        if row.connection.version != connection.version - 1:
            raise ConcurrencyConflict(f"connection {connection.id} was changed by someone else")
        if self._name_taken(connection.config_name, connection.tenant, except_id=connection.id):
            raise EntityConflict("connection", field="configName", value=connection.config_name)
        created_at = row.connection.created_at or connection.updated_at
        row.connection = _normalised(connection, created_at)
        return _copy(row.connection)

    async def assign_product(
        self, connection_id: UUID, product: str, now: datetime, *, tenant: Tenant
    ) -> Connection | None:
        self._guard()
        row = self._row(connection_id, tenant)
        if row is None or row.deleted_at is not None or row.connection.product_name:
            return None
        row.connection = replace(
            row.connection,
            product_name=product,
            updated_at=_utc(now),
            version=row.connection.version + 1,
        )
        return _copy(row.connection)


def _matches(c: Connection, query: ConnectionQuery) -> bool:
    created = c.created_at or datetime.min.replace(tzinfo=UTC)
    if query.unassigned:
        if c.product_name:
            return False
    elif query.product_name is not None and c.product_name != query.product_name:
        return False
    for key, value in query.metadata.items():
        stored = c.metadata.get(key)
        if not isinstance(stored, str) or stored != value:
            return False
    if query.type and c.type.value != query.type.upper():
        return False
    if query.created_from is not None and created < _utc(query.created_from):
        return False
    return not (query.created_to is not None and created > _utc(query.created_to))


def _normalised(c: Connection, created_at: datetime) -> Connection:
    created = _utc(created_at)
    return replace(
        c,
        product_name=c.product_name or "",
        metadata=copy.deepcopy(dict(c.metadata)),
        created_at=created,
        updated_at=_utc(c.updated_at) if c.updated_at else created,
        internal=False,
    )


def _copy(c: Connection) -> Connection:
    return replace(c, metadata=copy.deepcopy(dict(c.metadata)))
