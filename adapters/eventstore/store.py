"""Job event store on the ``eventsourcing`` library's process recorder (events + trackings).

The library is synchronous. Every call into it runs on a small dedicated thread pool, so the
event loop never blocks; the recorder is built lazily on that pool too (or eagerly by ``open``).

Appends go through one writer (group commit): appends that arrive while a transaction is
being written wait, then go together in the next one. The PostgreSQL recorder locks the events
table for each inserting transaction, so that notification ids commit in order (what the log's
followers rely on); one transaction for many appends takes that lock, and flushes the WAL,
once for all of them instead of once each. An append alone is written at once. After each
transaction that committed, the store tells this process's followers (``appended``).
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import psycopg
from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import (
    ConnectionPoolClosedError,
    DatetimeAsISO,
    InfrastructureFactory,
    IntegrityError,
    InterfaceError,
    InternalError,
    JSONTranscoder,
    Mapper,
    OperationalError,
    ProcessRecorder,
    ProgrammingError,
    RecordConflictError,
    StoredEvent,
    Tracking,
    UUIDAsHex,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg.sql import SQL, Identifier

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.async_postgres import AsyncPostgresEvents
from adapters.eventstore.chaining import Chainer, stored_record
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.log_watch import AppendSignal
from domain.audit_chain import Record
from domain.dedup import RequestSlotTaken
from domain.errors import ConcurrencyConflict, Unavailable
from domain.job import JobEvent

T = TypeVar("T")

_BATCH_LIMIT = 64
"""Most appends written in one transaction."""

# The library keeps its own row under this name in the tracking table.
_RESERVED_FOLLOWER = "__migration__"

# Errors meaning "the store cannot be reached or used right now". Raw driver errors appear
# where the library does not translate (e.g. a failing BEGIN or PRAGMA on SQLite).
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    ConnectionPoolClosedError,
    sqlite3.OperationalError,
    sqlite3.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


def postgres_env(
    database: PostgresAddress,
    *,
    schema: str | None = None,
    connect_timeout: int = 5,
    pool_size: int = 5,
) -> dict[str, str]:
    """Library settings for a PostgreSQL database."""
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": database.database,
        "POSTGRES_HOST": database.host,
        "POSTGRES_PORT": str(database.port),
        "POSTGRES_USER": database.user,
        "POSTGRES_PASSWORD": database.password,
        "POSTGRES_CONNECT_TIMEOUT": str(connect_timeout),
        "POSTGRES_POOL_SIZE": "2",
        "POSTGRES_MAX_OVERFLOW": str(max(0, pool_size - 2)),
        "POSTGRES_LOCK_TIMEOUT": "10",
        # The insert functions skip the table lock that keeps ids in commit order.
        "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
        "CREATE_TABLE": "y",
    }
    if schema:
        env["POSTGRES_SCHEMA"] = schema
    return env


def sqlite_env(path: Path) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "SQLITE_LOCK_TIMEOUT": "10",
        "CREATE_TABLE": "y",
    }


def memory_env() -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def _transcoder() -> JSONTranscoder:
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    return transcoder


def _single_attempt(method: Callable[..., T]) -> Callable[..., T]:
    """The method without the library's retry loop (a probe must answer quickly)."""
    # ``method`` is a bound method; ``Callable`` does not declare ``__self__``.
    func = getattr(type(method.__self__), method.__name__)  # type: ignore[attr-defined]
    inner = getattr(func, "__wrapped__", func)
    return functools.partial(inner, method.__self__)  # type: ignore[attr-defined]


class EventsourcingJobEventStore(JobEventStore):
    """``JobEventStore`` on PostgreSQL, SQLite or memory, chosen by the settings in ``env``.

    ``env`` is the library's environment, given explicitly (``os.environ`` is never read).
    Open with ``for_database`` or ``in_memory`` (cheap, no I/O), optionally ``await open()``
    to fail fast and create the tables; finish with ``await close()``.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        max_workers: int = 8,
        fail_fast: bool = False,
        address: PostgresAddress | None = None,
    ) -> None:
        self._env = dict(env)
        self._fail_fast = fail_fast
        self._max_workers = max_workers
        postgres = env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres"
        self._address = address if postgres else None
        self._fast: AsyncPostgresEvents | None = None
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="fetcher-eventstore")
        self._init_lock = threading.Lock()
        self._factory: InfrastructureFactory[Any] | None = None
        self._recorder: ProcessRecorder | None = None
        self._mapper: Mapper[UUID] | None = None
        self._closed = False
        self._pending: list[tuple[list[DomainEvent], asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._chain = Chainer()
        self.appended = AppendSignal()
        """Told after every transaction that committed records (this process's appends)."""
        if self._env.get("PERSISTENCE_MODULE") == "eventsourcing.sqlite":
            self._sqlite_path: Path | None = Path(self._env["SQLITE_DBNAME"])
        else:
            self._sqlite_path = None

    @classmethod
    def for_database(
        cls,
        database: PostgresAddress | Path,
        *,
        schema: str | None = None,
        max_workers: int = 8,
        connect_timeout: int = 5,
        fail_fast: bool = False,
    ) -> EventsourcingJobEventStore:
        """A PostgreSQL database (tables in ``schema``, default public) or a SQLite file.

        The library tries each statement up to ten times, each waiting for a connection up
        to ``connect_timeout``: a caller waits up to a minute while the database is down.
        With ``fail_fast`` (a process that answers requests) each statement is tried once on
        a connection checked before use, so an outage is ``Unavailable`` within
        ``connect_timeout``."""
        if isinstance(database, Path):
            return cls(sqlite_env(database), max_workers=max_workers, fail_fast=fail_fast)
        env = postgres_env(
            database, schema=schema, connect_timeout=connect_timeout, pool_size=max_workers
        )
        if fail_fast:
            env["POSTGRES_PRE_PING"] = "y"
        return cls(env, max_workers=max_workers, fail_fast=fail_fast, address=database)

    @classmethod
    def in_memory(cls) -> EventsourcingJobEventStore:
        """The library's in-process recorder: nothing survives the process."""
        return cls(memory_env())

    # The seam: everything below that touches the library runs on the executor.

    def _ensure_open(self) -> tuple[ProcessRecorder, Mapper[UUID]]:
        with self._init_lock:
            if self._closed:
                raise Unavailable("the event store is closed")
            if self._recorder is None or self._mapper is None:
                if self._sqlite_path is not None:
                    self._sqlite_path.parent.mkdir(parents=True, exist_ok=True)
                factory, recorder = self._create_tables()
                self._recorder = recorder
                self._mapper = factory.mapper(transcoder=_transcoder())
                self._factory = factory
            return self._recorder, self._mapper

    def _create_tables(self) -> tuple[InfrastructureFactory[Any], ProcessRecorder]:
        """Creates the tables if missing. Processes starting together race on PostgreSQL's
        ``CREATE TABLE IF NOT EXISTS`` (a unique violation in its catalog); the loser retries."""
        for attempt in range(_CREATE_ATTEMPTS):
            factory: InfrastructureFactory[Any] = InfrastructureFactory.construct(self._env)
            try:
                _create_schema(factory, self._env.get("POSTGRES_SCHEMA"))
                return factory, factory.process_recorder()
            except _CREATE_RACE:
                factory.close()
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))
            except BaseException:
                factory.close()
                raise
        raise AssertionError("unreachable")

    def _attempts(self, method: Callable[..., T]) -> Callable[..., T]:
        """A recorder method as this store calls it: once when failing fast, else with the
        library's retries."""
        owner = type(getattr(method, "__self__", None))
        library = getattr(owner, getattr(method, "__name__", ""), None)
        if self._fail_fast and hasattr(library, "__wrapped__"):
            return _single_attempt(method)
        return method

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

    def _decode(self, mapper: Mapper[UUID], stored: StoredEvent) -> DomainEvent:
        event = mapper.to_domain_event(stored)
        if not isinstance(event, DomainEvent):
            raise TypeError(f"stored event {stored.topic!r} is not a domain event")
        return event

    # JobEventStore

    async def open(self) -> None:
        """Connect and create the tables now rather than on first use."""
        await self._run(self._ensure_open)

    async def append(self, events: Sequence[DomainEvent]) -> int:
        if not events:
            raise ValueError("append needs at least one event")
        if self._closed:
            raise Unavailable("the event store is closed")
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((list(events), done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write_pending())
        try:
            return await asyncio.shield(done)
        except RecordConflictError as e:
            ids = ", ".join(sorted({str(ev.originator_id) for ev in events}))
            raise ConcurrencyConflict(f"another change was recorded first for {ids}") from e

    async def _write_pending(self) -> None:
        """The single writer: takes what is pending, writes it in one transaction, repeats."""
        while self._pending:
            batch = self._pending[:_BATCH_LIMIT]
            del self._pending[:_BATCH_LIMIT]
            try:
                fast = await self._fast_path()
                insert: _Insert = (
                    functools.partial(self._insert_async, fast)
                    if fast is not None
                    else functools.partial(self._run, self._insert)
                )
                outcomes = await _append_batch([events for events, _ in batch], insert)
            except asyncio.CancelledError:
                for _, done in (*batch, *self._pending):
                    done.cancel()
                self._pending.clear()
                raise
            except Exception as error:
                outcomes = [error] * len(batch)
            for (_, done), outcome in zip(batch, outcomes, strict=True):
                if done.done():
                    continue
                if isinstance(outcome, BaseException):
                    done.set_exception(outcome)
                else:
                    done.set_result(outcome)
            if any(not isinstance(outcome, BaseException) for outcome in outcomes):
                self.appended.notify()

    def _insert(self, events: list[DomainEvent]) -> Sequence[int]:
        recorder, mapper = self._ensure_open()
        stored, heads = self._chain.seal(
            [mapper.to_stored_event(e) for e in events],
            functools.partial(_stored_version, recorder),
        )
        ids = self._attempts(recorder.insert_events)(stored)
        if not ids or len(ids) != len(events):
            raise RuntimeError("the recorder did not return a notification id for every event")
        self._chain.remember_heads(heads)
        return ids

    async def _insert_async(
        self, fast: AsyncPostgresEvents, events: list[DomainEvent]
    ) -> Sequence[int]:
        mapper = self._opened_mapper()
        stored = [mapper.to_stored_event(e) for e in events]
        previous: dict[tuple[UUID, int], StoredEvent] = {}
        for job_id, version in self._chain.unknown_previous(stored):
            found = await fast.select(job_id, after=version - 1, up_to=version)
            if found:
                previous[(job_id, version)] = found[0]
        sealed, heads = self._chain.seal(stored, lambda job, version: previous.get((job, version)))
        ids = await fast.insert(sealed)
        if len(ids) != len(events):
            raise RuntimeError("the database did not return a notification id for every event")
        self._chain.remember_heads(heads)
        return ids

    async def _fast_path(self) -> AsyncPostgresEvents | None:
        """On PostgreSQL, the reads of a stream and the inserts, on the event loop
        (``adapters.eventstore.async_postgres``), once the library has created the tables."""
        if self._address is None:
            return None
        if self._fast is None:
            recorder, _ = await self._run(self._ensure_open)
            if not isinstance(recorder, PostgresApplicationRecorder):
                return None
            fast = AsyncPostgresEvents(
                self._address,
                schema=recorder.datastore.schema,
                table=recorder.events_table_name,
                channel=recorder.channel_name,
                pool_size=self._max_workers,
                connect_timeout=float(self._env.get("POSTGRES_CONNECT_TIMEOUT", "5")),
                lock_timeout=int(self._env.get("POSTGRES_LOCK_TIMEOUT", "10")),
                attempts=2 if self._fail_fast else 10,
            )
            if self._fast is None:
                self._fast = fast
        return self._fast

    def _opened_mapper(self) -> Mapper[UUID]:
        mapper = self._mapper
        if mapper is None:
            raise Unavailable("the event store is closed")
        return mapper

    async def job_events(self, job_id: UUID) -> list[JobEvent]:
        return await self._read_stream(job_id, JobEvent)

    async def slot_events(self, slot_id: UUID) -> list[RequestSlotTaken]:
        return await self._read_stream(slot_id, RequestSlotTaken)

    async def _read_stream(self, originator_id: UUID, kind: type[T]) -> list[T]:
        fast = await self._fast_path()
        if fast is None:
            return await self._run(self._select, originator_id, kind)
        records = await fast.select(originator_id)
        return self._decoded(self._opened_mapper(), originator_id, records, kind)

    def _select(self, originator_id: UUID, kind: type[T]) -> list[T]:
        recorder, mapper = self._ensure_open()
        records = self._attempts(recorder.select_events)(originator_id)
        return self._decoded(mapper, originator_id, records, kind)

    def _decoded(
        self,
        mapper: Mapper[UUID],
        originator_id: UUID,
        records: Sequence[StoredEvent],
        kind: type[T],
    ) -> list[T]:
        self._chain.remember_read(records)
        out: list[T] = []
        for stored in records:
            event = self._decode(mapper, stored)
            if not isinstance(event, kind):
                raise TypeError(f"{originator_id} holds a {type(event).__name__}")
            out.append(event)
        return out

    async def read_log(self, after: int, limit: int) -> list[LoggedEvent]:
        if limit <= 0:
            return []
        fast = await self._fast_path()
        if fast is None:
            return await self._run(self._read_log, after, limit)
        mapper = self._opened_mapper()
        return [
            LoggedEvent(notification_id, self._decode(mapper, stored))
            for notification_id, stored in await fast.select_log(after, limit)
        ]

    def _read_log(self, after: int, limit: int) -> list[LoggedEvent]:
        recorder, mapper = self._ensure_open()
        notifications = self._attempts(recorder.select_notifications)(
            start=after, limit=limit, inclusive_of_start=False
        )
        return [LoggedEvent(n.id, self._decode(mapper, n)) for n in notifications]

    async def read_records(self, after: int, limit: int) -> list[Record]:
        """The log's records after position ``after`` as stored (undecoded), for auditing."""
        if limit <= 0:
            return []
        fast = await self._fast_path()
        if fast is not None:
            return await fast.select_records(after, limit)
        return await self._run(self._read_records, after, limit)

    def _read_records(self, after: int, limit: int) -> list[Record]:
        recorder, _ = self._ensure_open()
        notifications = self._attempts(recorder.select_notifications)(
            start=after, limit=limit, inclusive_of_start=False
        )
        return [stored_record(n, n.id) for n in notifications]

    async def last_notification_id(self) -> int:
        return await self._run(self._last_notification_id)

    def _last_notification_id(self) -> int:
        recorder, _ = self._ensure_open()
        return self._attempts(recorder.max_notification_id)() or 0

    async def position(self, follower: str) -> int:
        _check_follower(follower)
        return await self._run(self._position, follower)

    def _position(self, follower: str) -> int:
        recorder, _ = self._ensure_open()
        return self._attempts(recorder.max_tracking_id)(follower) or 0

    async def advance(self, follower: str, notification_id: int) -> bool:
        _check_follower(follower)
        return await self._run(self._advance, follower, notification_id)

    def _advance(self, follower: str, notification_id: int) -> bool:
        """One statement: each recorder refuses (``IntegrityError``) a position that is not
        past the recorded one (the single-row upsert on PostgreSQL and SQLite, the in-memory
        recorder's check), so a position never moves backwards."""
        recorder, _ = self._ensure_open()
        try:
            self._attempts(recorder.insert_tracking)(Tracking(follower, notification_id))
        except IntegrityError:
            # This position (or a later one) was recorded first, e.g. by a concurrent advance.
            return False
        return True

    async def check(self) -> None:
        await self._run(self._check)

    def _check(self) -> None:
        recorder, _ = self._ensure_open()
        _single_attempt(recorder.max_notification_id)()

    def notification_channel(self) -> str | None:
        """The PostgreSQL channel the recorder notifies in every transaction that inserts
        events (see ``adapters.eventstore.listener``); None on other databases or before the
        store is open."""
        channel = getattr(self._recorder, "channel_name", None)
        return channel if isinstance(channel, str) else None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._fast is not None:
            await self._fast.close()
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        with self._init_lock:
            if self._factory is not None:
                self._factory.close()
            self._factory = self._recorder = self._mapper = None


_CREATE_ATTEMPTS = 5
# "tuple concurrently updated" (InternalError) is the other face of the same catalog race.
_CREATE_RACE: tuple[type[BaseException], ...] = (IntegrityError, ProgrammingError, InternalError)


def _create_schema(factory: InfrastructureFactory[Any], schema: str | None) -> None:
    if schema and isinstance(factory, PostgresFactory):
        with factory.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("CREATE SCHEMA IF NOT EXISTS {0}").format(Identifier(schema)))


def _stored_version(
    recorder: ProcessRecorder, originator_id: UUID, version: int
) -> StoredEvent | None:
    found = recorder.select_events(originator_id, gt=version - 1, lte=version, limit=1)
    return found[0] if found else None


_Insert = Callable[[list[DomainEvent]], Awaitable[Sequence[int]]]
"""Inserts events in one transaction; their notification ids, in the order given."""


async def _append_batch(
    batch: list[list[DomainEvent]], insert: _Insert
) -> list[int | BaseException]:
    """Every append of ``batch`` in one transaction; when one of them conflicts (and so the
    whole transaction fails), each is written again in a transaction of its own, so only the
    conflicting one fails. Each append's outcome: its last notification id, or its conflict."""
    if len(batch) > 1:
        try:
            ids = await insert([event for events in batch for event in events])
        except RecordConflictError:
            pass
        else:
            outcomes: list[int | BaseException] = []
            start = 0
            for events in batch:
                outcomes.append(max(ids[start : start + len(events)]))
                start += len(events)
            return outcomes
    outcomes = []
    for events in batch:
        try:
            outcomes.append(max(await insert(events)))
        except RecordConflictError as conflict:
            outcomes.append(conflict)
    return outcomes


def _check_follower(follower: str) -> None:
    if not follower or follower == _RESERVED_FOLLOWER:
        raise ValueError(f"invalid follower name {follower!r}")
