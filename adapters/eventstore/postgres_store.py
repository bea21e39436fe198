"""Job event store on PostgreSQL: Fetcher's own tables (``adapters.eventstore.async_postgres``)
on an asyncpg pool of its own, appends through one writer (``group_commit``), job events
chained as they are recorded (``chaining``).

What stays from ``eventsourcing`` here is its pure part: the domain events and the mapper and
transcoder that turn them into stored bytes, so the stored bytes are the ones the library's
recorder wrote before. See ``docs/design/event-store.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TypeVar
from uuid import UUID

from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import StoredEvent

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.async_postgres import RESERVED_FOLLOWER, AsyncPostgresEvents
from adapters.eventstore.chaining import Chainer
from adapters.eventstore.group_commit import GroupCommit
from adapters.eventstore.mapping import decoded_stream, new_mapper, to_domain_event
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.log_watch import AppendSignal
from domain.audit_chain import Record
from domain.dedup import RequestSlotTaken
from domain.errors import Unavailable
from domain.job import JobEvent

T = TypeVar("T")

POOL_SIZE = 8
"""The store's connections at most, per process."""


class PostgresJobEventStore(JobEventStore):
    """``JobEventStore`` on a PostgreSQL database (tables in ``schema``, default public), on
    up to ``pool_size`` asyncpg connections of its own.

    Cheap to build (no I/O); the tables are created on first use, or by ``await open()``,
    which so fails fast when the database cannot be used; finish with ``await close()``.
    ``fail_fast`` (a process that answers requests): a statement meeting a broken connection
    is tried once more on a new one, and a database that is down is ``Unavailable`` within
    ``connect_timeout``; otherwise statements are tried for about two seconds, riding out a
    short restart.
    """

    def __init__(
        self,
        database: PostgresAddress,
        *,
        schema: str | None = None,
        pool_size: int = POOL_SIZE,
        connect_timeout: int = 5,
        fail_fast: bool = False,
    ) -> None:
        self._tables = AsyncPostgresEvents(
            database,
            schema=schema or "public",
            pool_size=pool_size,
            connect_timeout=float(connect_timeout),
            attempts=2 if fail_fast else 10,
        )
        self._mapper = new_mapper()
        self._chain = Chainer()
        self._closed = False
        self._created = False
        self._creating = asyncio.Lock()
        self.appended = AppendSignal()
        """Told after every transaction that committed records (this process's appends)."""
        self._writer = GroupCommit(self._insert, self.appended.notify)

    async def open(self) -> None:
        """Creates the tables where missing (and so checks the database can be used)."""
        await self._ready()

    async def _ready(self) -> AsyncPostgresEvents:
        """The tables, created first when this store has not done it yet."""
        if self._closed:
            raise Unavailable("the event store is closed")
        if not self._created:
            async with self._creating:
                if not self._created:
                    await self._tables.create_tables()
                    self._created = True
        return self._tables

    async def append(self, events: Sequence[DomainEvent]) -> int:
        await self._ready()
        return await self._writer.append(events)

    async def _insert(self, events: list[DomainEvent]) -> Sequence[int]:
        stored = [self._mapper.to_stored_event(e) for e in events]
        previous: dict[tuple[UUID, int], StoredEvent] = {}
        for job_id, version in self._chain.unknown_previous(stored):
            found = await self._tables.select(job_id, after=version - 1, up_to=version)
            if found:
                previous[(job_id, version)] = found[0]
        linked, heads = self._chain.link(stored, lambda job, version: previous.get((job, version)))
        ids = await self._tables.insert(linked)
        if len(ids) != len(events):
            raise RuntimeError("the database did not return a notification id for every event")
        self._chain.remember_heads(heads)
        return ids

    async def job_events(self, job_id: UUID) -> list[JobEvent]:
        return await self._read_stream(job_id, JobEvent)

    async def slot_events(self, slot_id: UUID) -> list[RequestSlotTaken]:
        return await self._read_stream(slot_id, RequestSlotTaken)

    async def _read_stream(self, originator_id: UUID, kind: type[T]) -> list[T]:
        records = await (await self._ready()).select(originator_id)
        self._chain.remember_read(records)
        return decoded_stream(self._mapper, originator_id, records, kind)

    async def read_log(self, after: int, limit: int) -> list[LoggedEvent]:
        if limit <= 0:
            return []
        return [
            LoggedEvent(notification_id, to_domain_event(self._mapper, stored))
            for notification_id, stored in await (await self._ready()).select_log(after, limit)
        ]

    async def read_records(self, after: int, limit: int) -> list[Record]:
        """The log's records after position ``after`` as stored (undecoded), for auditing."""
        if limit <= 0:
            return []
        return await (await self._ready()).select_records(after, limit)

    async def job_records(self, job_id: UUID) -> list[Record]:
        return await (await self._ready()).select_job_records(job_id)

    async def last_notification_id(self) -> int:
        return await (await self._ready()).max_notification_id()

    async def position(self, follower: str) -> int:
        check_follower(follower)
        return await (await self._ready()).position(follower)

    async def advance(self, follower: str, notification_id: int) -> bool:
        check_follower(follower)
        return await (await self._ready()).advance(follower, notification_id)

    async def check(self) -> None:
        if self._closed:
            raise Unavailable("the event store is closed")
        await self._tables.ping()

    def notification_channel(self) -> str:
        """The channel every transaction that inserts events notifies
        (``adapters.eventstore.listener``)."""
        return self._tables.channel

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._tables.close()


def check_follower(follower: str) -> None:
    if not follower or follower == RESERVED_FOLLOWER:
        raise ValueError(f"invalid follower name {follower!r}")
