"""Job event store on the ``eventsourcing`` library's process recorder, for the embedded
default's SQLite file and for memory; PostgreSQL has its own store on asyncpg
(``adapters.eventstore.postgres_store``). ``event_store_for`` picks one for a database.

The library is synchronous. Every call into it runs on a small dedicated thread pool, so the
event loop never blocks; the recorder is built lazily on that pool too (or eagerly by ``open``).
Appends go through one writer (``group_commit``). After each transaction that committed, the
store tells this process's followers (``appended``).
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import (
    ConnectionPoolClosedError,
    InfrastructureFactory,
    IntegrityError,
    InterfaceError,
    Mapper,
    OperationalError,
    ProcessRecorder,
    StoredEvent,
    Tracking,
)

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.chaining import Chainer, stored_record
from adapters.eventstore.group_commit import GroupCommit
from adapters.eventstore.mapping import decoded_stream, new_mapper, to_domain_event
from adapters.eventstore.postgres_store import PostgresJobEventStore, check_follower
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.log_watch import AppendSignal
from domain.audit_chain import Record
from domain.dedup import RequestSlotTaken
from domain.errors import Unavailable
from domain.job import JobEvent

T = TypeVar("T")

# Errors meaning "the store cannot be reached or used right now". Raw driver errors appear
# where the library does not translate (e.g. a failing BEGIN or PRAGMA on SQLite).
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    ConnectionPoolClosedError,
    sqlite3.OperationalError,
    sqlite3.InterfaceError,
)


def sqlite_env(path: Path) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "SQLITE_LOCK_TIMEOUT": "10",
        "CREATE_TABLE": "y",
    }


def memory_env() -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def event_store_for(
    database: PostgresAddress | Path,
    *,
    schema: str | None = None,
    connect_timeout: int = 5,
    fail_fast: bool = False,
) -> PostgresJobEventStore | EventsourcingJobEventStore:
    """The event store of a PostgreSQL database (tables in ``schema``, default public) or of
    a SQLite file. Cheap (no I/O);
    ``await open()`` creates the tables.

    ``fail_fast``: for a process that answers requests, an outage is ``Unavailable`` within
    ``connect_timeout`` instead of after the store's retries."""
    if isinstance(database, Path):
        return EventsourcingJobEventStore(sqlite_env(database))
    return PostgresJobEventStore(
        database, schema=schema, connect_timeout=connect_timeout, fail_fast=fail_fast
    )


class EventsourcingJobEventStore(JobEventStore):
    """``JobEventStore`` on the library's SQLite or in-memory recorder, chosen by ``env`` (the
    library's environment, given explicitly: ``os.environ`` is never read). Build with
    ``event_store_for`` or ``in_memory`` (cheap, no I/O), optionally ``await open()`` to fail
    fast and create the tables; finish with ``await close()``.
    """

    def __init__(self, env: Mapping[str, str], *, max_workers: int = 8) -> None:
        self._env = dict(env)
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="fetcher-eventstore")
        self._init_lock = threading.Lock()
        self._factory: InfrastructureFactory[Any] | None = None
        self._recorder: ProcessRecorder | None = None
        self._mapper: Mapper[UUID] = new_mapper()
        self._closed = False
        self._chain = Chainer()
        self.appended = AppendSignal()
        """Told after every transaction that committed records (this process's appends)."""
        self._writer = GroupCommit(self._insert, self.appended.notify)
        if self._env.get("PERSISTENCE_MODULE") == "eventsourcing.sqlite":
            self._sqlite_path: Path | None = Path(self._env["SQLITE_DBNAME"])
        else:
            self._sqlite_path = None

    @classmethod
    def in_memory(cls) -> EventsourcingJobEventStore:
        """The library's in-process recorder: nothing survives the process."""
        return cls(memory_env())

    # The seam: everything below that touches the library runs on the executor.

    def _ensure_open(self) -> ProcessRecorder:
        with self._init_lock:
            if self._closed:
                raise Unavailable("the event store is closed")
            if self._recorder is None:
                if self._sqlite_path is not None:
                    self._sqlite_path.parent.mkdir(parents=True, exist_ok=True)
                factory: InfrastructureFactory[Any] = InfrastructureFactory.construct(self._env)
                try:
                    self._recorder = factory.process_recorder()
                except BaseException:
                    factory.close()
                    raise
                self._factory = factory
            return self._recorder

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise Unavailable("the event store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(func, *args))
        except _UNAVAILABLE as e:
            raise Unavailable() from e
        except RuntimeError as e:  # the executor was shut down under us
            if self._closed:
                raise Unavailable("the event store is closed") from e
            raise

    # JobEventStore

    async def open(self) -> None:
        """Opens the file and creates the tables now rather than on first use."""
        await self._run(self._ensure_open)

    async def append(self, events: Sequence[DomainEvent]) -> int:
        if self._closed:
            raise Unavailable("the event store is closed")
        return await self._writer.append(events)

    async def _insert(self, events: list[DomainEvent]) -> Sequence[int]:
        return await self._run(self._insert_now, events)

    def _insert_now(self, events: list[DomainEvent]) -> Sequence[int]:
        recorder = self._ensure_open()
        stored, heads = self._chain.link(
            [self._mapper.to_stored_event(e) for e in events],
            functools.partial(_stored_version, recorder),
        )
        ids = recorder.insert_events(stored)
        if not ids or len(ids) != len(events):
            raise RuntimeError("the recorder did not return a notification id for every event")
        self._chain.remember_heads(heads)
        return ids

    async def job_events(self, job_id: UUID) -> list[JobEvent]:
        return await self._run(self._select, job_id, JobEvent)

    async def slot_events(self, slot_id: UUID) -> list[RequestSlotTaken]:
        return await self._run(self._select, slot_id, RequestSlotTaken)

    def _select(self, originator_id: UUID, kind: type[T]) -> list[T]:
        records = self._ensure_open().select_events(originator_id)
        self._chain.remember_read(records)
        return decoded_stream(self._mapper, originator_id, records, kind)

    async def read_log(self, after: int, limit: int) -> list[LoggedEvent]:
        if limit <= 0:
            return []
        return await self._run(self._read_log, after, limit)

    def _read_log(self, after: int, limit: int) -> list[LoggedEvent]:
        notifications = self._ensure_open().select_notifications(
            start=after, limit=limit, inclusive_of_start=False
        )
        return [LoggedEvent(n.id, to_domain_event(self._mapper, n)) for n in notifications]

    async def read_records(self, after: int, limit: int) -> list[Record]:
        """The log's records after position ``after`` as stored (undecoded), for auditing."""
        if limit <= 0:
            return []
        return await self._run(self._read_records, after, limit)

    def _read_records(self, after: int, limit: int) -> list[Record]:
        notifications = self._ensure_open().select_notifications(
            start=after, limit=limit, inclusive_of_start=False
        )
        return [stored_record(n, n.id) for n in notifications]

    async def job_records(self, job_id: UUID) -> list[Record]:
        """The job's records as stored; the recorder gives no positions by stream (0)."""
        return await self._run(
            lambda: [stored_record(e) for e in self._ensure_open().select_events(job_id)]
        )

    async def last_notification_id(self) -> int:
        return await self._run(lambda: self._ensure_open().max_notification_id() or 0)

    async def position(self, follower: str) -> int:
        check_follower(follower)
        return await self._run(lambda: self._ensure_open().max_tracking_id(follower) or 0)

    async def advance(self, follower: str, notification_id: int) -> bool:
        check_follower(follower)
        return await self._run(self._advance, follower, notification_id)

    def _advance(self, follower: str, notification_id: int) -> bool:
        """One statement: each recorder refuses (``IntegrityError``) a position that is not
        past the recorded one (the single-row upsert on SQLite, the in-memory recorder's
        check), so a position never moves backwards."""
        try:
            self._ensure_open().insert_tracking(Tracking(follower, notification_id))
        except IntegrityError:
            # This position (or a later one) was recorded first, e.g. by a concurrent advance.
            return False
        return True

    async def check(self) -> None:
        await self._run(lambda: self._ensure_open().max_notification_id())

    def notification_channel(self) -> None:
        """No other process shares a SQLite file or memory: nothing to listen on."""
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        with self._init_lock:
            if self._factory is not None:
                self._factory.close()
            self._factory = self._recorder = None


def _stored_version(
    recorder: ProcessRecorder, originator_id: UUID, version: int
) -> StoredEvent | None:
    found = recorder.select_events(originator_id, gt=version - 1, lte=version, limit=1)
    return found[0] if found else None


EventStore = PostgresJobEventStore | EventsourcingJobEventStore
"""An event store opened by ``event_store_for``: the port plus opening, audit reads and the
channel other processes are told on."""
