"""A connection repository that remembers name lookups for a short while.

Every job submission resolves its datasources by config name, and every job run resolves them
again; under load that is one SQL statement (and a pooled database connection) each, for rows
that change a few times a day. This wrapper answers ``by_config_names`` from what it read
within the last ``ttl_seconds``, per (tenant, config name), and passes everything else through.
Any write made through it (add, update, assign, delete) forgets everything it remembered, and
everything the caches it is ``linked`` to remembered, so an edit made in this process is seen
by the next lookup.

Why this is safe where it is used (the API's submissions, with ``CONNECTION_LOOKUP_CACHE_SECONDS``;
the worker's runs, with the shorter ``FETCHER_WORKER_CONNECTION_CACHE_SECONDS``):

- The key holds the tenant: one tenant's lookup never answers another's.
- Names not found are never remembered: a connection registered elsewhere is seen at once.
- An edit or deletion made by another process is seen within ``ttl_seconds``, never later.
  Meanwhile a job may be accepted, or run, against the connection as it was (its stored
  version, whose sealed credentials it carries). A job run after the window reads the current
  version, or fails when the connection is gone; a retry (each try resolves the connections
  again) past the window reads it too. The connectivity check, datasource pools and
  discovered schemas are keyed by version, so a new version is never served from an old
  one's.
- A ``ttl_seconds`` of 0 remembers nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from uuid import UUID

from application.ports.clock import Clock
from application.ports.connection_repository import (
    ConnectionPage,
    ConnectionQuery,
    ConnectionRepository,
)
from domain.connection import Connection
from domain.tenant import Tenant

_PRUNE_AT = 4096


class CachingConnectionRepository(ConnectionRepository):
    def __init__(
        self,
        inner: ConnectionRepository,
        ttl_seconds: float,
        clock: Clock,
        *,
        linked: Sequence[CachingConnectionRepository] = (),
    ) -> None:
        """``linked``: other caches of the same repository in this process (the worker's,
        beside the API's), which forget what they remembered on a write made through this one."""
        if ttl_seconds < 0:
            raise ValueError("ttl_seconds must not be negative")
        self._inner = inner
        self._ttl = timedelta(seconds=ttl_seconds)
        self._clock = clock
        self._linked = tuple(linked)
        self._found: dict[tuple[str, str], tuple[datetime, Connection]] = {}

    @property
    def inner(self) -> ConnectionRepository:
        return self._inner

    async def by_config_names(
        self, names: Sequence[str], *, tenant: Tenant
    ) -> dict[str, Connection]:
        if not self._ttl:
            return await self._inner.by_config_names(names, tenant=tenant)
        now = self._clock.now()
        oldest = now - self._ttl
        found: dict[str, Connection] = {}
        missing: list[str] = []
        for name in names:
            remembered = self._found.get((tenant.id, name))
            if remembered is not None and remembered[0] > oldest:
                found[name] = remembered[1]
            else:
                missing.append(name)
        if missing:
            read = await self._inner.by_config_names(missing, tenant=tenant)
            if len(self._found) >= _PRUNE_AT:
                self._found = {k: v for k, v in self._found.items() if v[0] > oldest}
            for name, connection in read.items():
                self._found[(tenant.id, name)] = (now, connection)
            found.update(read)
        return found

    def forget(self) -> None:
        self._found.clear()
        for cache in self._linked:
            cache.forget()

    # Passed through; writes forget what was remembered.

    async def get(self, connection_id: UUID, *, tenant: Tenant) -> Connection | None:
        return await self._inner.get(connection_id, tenant=tenant)

    async def list(self, query: ConnectionQuery, *, tenant: Tenant) -> ConnectionPage:
        return await self._inner.list(query, tenant=tenant)

    async def check(self) -> None:
        await self._inner.check()

    async def add(self, connection: Connection) -> None:
        try:
            await self._inner.add(connection)
        finally:
            self.forget()

    async def update(self, connection: Connection) -> Connection:
        try:
            return await self._inner.update(connection)
        finally:
            self.forget()

    async def assign_product(
        self, connection_id: UUID, product: str, now: datetime, *, tenant: Tenant
    ) -> Connection | None:
        try:
            return await self._inner.assign_product(connection_id, product, now, tenant=tenant)
        finally:
            self.forget()

    async def soft_delete(self, connection_id: UUID, now: datetime, *, tenant: Tenant) -> bool:
        try:
            return await self._inner.soft_delete(connection_id, now, tenant=tenant)
        finally:
            self.forget()
