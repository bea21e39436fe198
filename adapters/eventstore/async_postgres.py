"""The event store's statements on PostgreSQL, on asyncpg: reading one stream, reading the
notification log (decoded, or as stored for the audit), and inserting events in the library's
commit-ordered way.

``eventsourcing``'s PostgreSQL recorder is synchronous (psycopg), so the store calls it on a
thread pool. A job's submission and run read a stream and append to it several times each; on
the recorder, every one of those is a hop to the pool and back and psycopg's Python-level work
(its pipeline, the text dump of the composite array). These two statements run here instead,
on the event loop, against the library's own tables: same columns, same order, same table lock and
``NOTIFY`` in each inserting transaction (so notification ids still commit in order and the
listeners still wake), same refusal of a version taken twice (``RecordConflictError``). Every
other use of the tables (trackings, table creation, the last notification id) stays on the
library.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

import asyncpg
from eventsourcing.persistence import RecordConflictError, StoredEvent

from adapters.common.postgres import PostgresAddress
from domain.audit_chain import Record
from domain.errors import Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

# A connection that could not be reached or broke while in use: the statement did not run,
# or its transaction did not commit (an insert is retried only when it surely did not).
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    # A connection the server dropped while asyncpg had not yet noticed can be left mid-state.
    asyncpg.InternalClientError,
)

# Tried again as the library's recorder does: nothing was written.
_TRANSIENT: tuple[type[BaseException], ...] = (*_CONNECTION_ERRORS, asyncpg.LockNotAvailableError)


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


async def _keep_session(connection: asyncpg.Connection) -> None:
    """Releasing a connection to the pool keeps its session as it is: these statements set
    nothing that outlives their transaction, so asyncpg's reset (a round trip) is not needed."""


class AsyncPostgresEvents:
    """Reads and inserts on the library's events table ``schema.table``.

    ``attempts``: how often a statement meeting a broken or unreachable connection is tried
    (with ``retry_wait`` seconds between), as the library's recorder retries; 2 for a process
    that answers requests (a pooled connection dropped by a database restart is replaced at
    once, a database that is down is ``Unavailable`` within ``connect_timeout``).
    """

    def __init__(
        self,
        address: PostgresAddress,
        *,
        schema: str,
        table: str,
        channel: str,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        lock_timeout: int = 10,
        attempts: int = 10,
        retry_wait: float = 0.2,
    ) -> None:
        self._address = address
        self._pool_size = max(1, pool_size)
        self._connect_timeout = connect_timeout
        self._attempts = max(1, attempts)
        self._retry_wait = retry_wait
        name = f"{_quote(schema)}.{_quote(table)}"
        self._select = (
            "SELECT originator_id, originator_version, topic, state "
            f"FROM {name} WHERE originator_id = $1 "
            "AND originator_version > $2 AND originator_version <= $3 "
            "ORDER BY originator_version"
        )
        self._log = (
            "SELECT notification_id, originator_id, originator_version, topic, state "
            f"FROM {name} WHERE notification_id > $1 ORDER BY notification_id LIMIT $2"
        )
        self._records = (
            "SELECT notification_id, originator_id::text, originator_version, topic, state "
            f"FROM {name} WHERE notification_id > $1 ORDER BY notification_id LIMIT $2"
        )
        self._lock = (
            f"SET LOCAL lock_timeout = '{int(lock_timeout)}s'; "
            f"LOCK TABLE {name} IN EXCLUSIVE MODE; NOTIFY {_quote(channel)}"
        )
        self._insert = (
            f"INSERT INTO {name} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::bytea[]) "
            "RETURNING notification_id"
        )
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()
        self._closed = False

    async def _connect(self) -> asyncpg.Pool:
        if self._closed:
            raise Unavailable("the event store is closed")
        if self._pool is not None:
            return self._pool
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    host=self._address.host,
                    port=self._address.port,
                    user=self._address.user,
                    password=self._address.password,
                    database=self._address.database,
                    timeout=self._connect_timeout,
                    min_size=0,
                    max_size=self._pool_size,
                    max_inactive_connection_lifetime=60.0,
                    reset=_keep_session,
                    # Each statement is prepared once per connection; no statement cache
                    # beyond these few is needed.
                    statement_cache_size=16,
                )
            return self._pool

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        for number in range(1, self._attempts + 1):
            try:
                return await attempt()
            except _TRANSIENT as error:
                if self._closed or number == self._attempts:
                    raise Unavailable("the event store cannot be reached") from error
                log.debug("event store statement failed, trying again: %s", error)
                if self._pool is not None and isinstance(error, _CONNECTION_ERRORS):
                    # One dropped connection means the others were most likely dropped too
                    # (a database restart): the next try starts on a new one.
                    await self._pool.expire_connections()
                if number > 1 or self._attempts > 2:
                    await asyncio.sleep(self._retry_wait)
        raise AssertionError("unreachable")

    async def select(
        self, originator_id: UUID, *, after: int = 0, up_to: int = 2**62
    ) -> list[StoredEvent]:
        """The stream's events with ``after < version <= up_to``, oldest first."""

        async def attempt() -> list[StoredEvent]:
            pool = await self._connect()
            rows = await pool.fetch(self._select, originator_id, after, up_to)
            return [StoredEvent(row[0], row[1], row[2], row[3]) for row in rows]

        return await self._retrying(attempt)

    async def select_log(self, after: int, limit: int) -> list[tuple[int, StoredEvent]]:
        """The notification log after ``after``, at most ``limit`` events, in order: each
        event with its notification id."""

        async def attempt() -> list[tuple[int, StoredEvent]]:
            pool = await self._connect()
            rows = await pool.fetch(self._log, after, limit)
            return [(row[0], StoredEvent(row[1], row[2], row[3], row[4])) for row in rows]

        return await self._retrying(attempt)

    async def select_records(self, after: int, limit: int) -> list[Record]:
        """The notification log after ``after`` as stored, for auditing: at most ``limit``
        records in order, the job id as text (no per-row objects but the record itself)."""

        async def attempt() -> list[Record]:
            pool = await self._connect()
            rows = await pool.fetch(self._records, after, limit)
            return [Record(*row) for row in rows]

        return await self._retrying(attempt)

    async def insert(self, events: Sequence[StoredEvent]) -> list[int]:
        """Inserts ``events`` in one transaction holding the table lock; their notification
        ids, in the order given. ``RecordConflictError`` when a version is already taken."""
        columns: tuple[list[Any], list[Any], list[Any], list[Any]] = ([], [], [], [])
        for event in events:
            columns[0].append(event.originator_id)
            columns[1].append(event.originator_version)
            columns[2].append(event.topic)
            columns[3].append(event.state)

        async def attempt() -> list[int]:
            pool = await self._connect()
            async with pool.acquire() as connection:
                transaction = connection.transaction()
                await transaction.start()
                try:
                    # Until here nothing was written: a broken connection is retried above.
                    await connection.execute(self._lock)
                    rows = await connection.fetch(self._insert, *columns)
                except asyncpg.UniqueViolationError as conflict:
                    await transaction.rollback()
                    raise RecordConflictError(str(conflict)) from None
                except _CONNECTION_ERRORS as broken:
                    raise Unavailable("the event store connection broke") from broken
                except BaseException:
                    await _rollback_quietly(transaction)
                    raise
                try:
                    await transaction.commit()
                except _CONNECTION_ERRORS as broken:
                    # The commit may or may not have happened: not retried.
                    raise Unavailable("the event store connection broke") from broken
                return [row[0] for row in rows]

        return await self._retrying(attempt)

    async def close(self) -> None:
        self._closed = True
        async with self._pool_lock:
            if self._pool is not None:
                pool, self._pool = self._pool, None
                try:
                    await asyncio.wait_for(pool.close(), timeout=5)
                except Exception:  # TimeoutError included
                    pool.terminate()


async def _rollback_quietly(transaction: Any) -> None:
    try:
        await transaction.rollback()
    except Exception as error:  # the original failure is the one to report
        log.debug("rollback failed: %s", error)
