"""The event store's tables on PostgreSQL and every statement on them, on asyncpg.

Fetcher owns these tables. Their layout is the one ``eventsourcing`` 9.5's PostgreSQL recorder
creates (``stored_events`` with ``notification_id bigserial`` and its unique index, and the
single-row ``notification_tracking`` with the library's ``__migration__`` row), so a database
written by the library's recorder is read in place; from here on the DDL below is the
definition. Each inserting transaction takes the events table's lock and runs ``NOTIFY`` on
the table's channel, so notification ids commit in order and listeners wake only on commit; a
version taken twice is ``RecordConflictError``. A follower's position only moves forward (a
conditional upsert). The library's recorder is not used on PostgreSQL: the library is
synchronous; this runs on the event loop, on asyncpg, the driver the process's other tables
of this database use too. The store keeps its own small asyncpg pool beside the SQLAlchemy
engine of those tables: a submission runs several statements here, and a checkout through
SQLAlchemy cost three times the submissions per second (``benchmarks/README.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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

# A connection not to give back to the pool (``insert`` reports one that broke during its
# transaction as ``Unavailable``).
_BROKEN: tuple[type[BaseException], ...] = (*_CONNECTION_ERRORS, Unavailable)

# Tried again as the library's recorder does: nothing was written.
_TRANSIENT: tuple[type[BaseException], ...] = (
    *_CONNECTION_ERRORS,
    asyncpg.LockNotAvailableError,
)


async def _keep_session(connection: asyncpg.Connection) -> None:
    """Releasing a connection to the pool keeps its session as it is: these statements set
    nothing that outlives their transaction, so asyncpg's reset (a round trip) is not needed."""


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


EVENTS_TABLE = "stored_events"
TRACKING_TABLE = "notification_tracking"
RESERVED_FOLLOWER = "__migration__"
"""The library's own row in the tracking table (its table-layout version)."""

_AUTOVACUUM = (
    "WITH (autovacuum_enabled = true, autovacuum_vacuum_threshold = 100000000, "
    "autovacuum_vacuum_scale_factor = 0.5, autovacuum_analyze_threshold = 1000, "
    "autovacuum_analyze_scale_factor = 0.01)"
)

# Processes starting together serialise their DDL on this lock (a race on
# ``CREATE TABLE IF NOT EXISTS`` is otherwise a unique violation in the catalog).
_DDL_LOCK = 0x6665746368657231  # "fetcher1"


class AsyncPostgresEvents:
    """The events table ``schema.stored_events`` and the tracking table
    ``schema.notification_tracking`` of the database at ``address``, on a pool of up to
    ``pool_size`` asyncpg connections opened on first use and closed by ``close``.

    ``attempts``: how often a statement meeting a broken or unreachable connection is tried
    (with ``retry_wait`` seconds between); 2 for a process that answers requests (a pooled
    connection dropped by a database restart is replaced at once, a database that is down is
    ``Unavailable`` within ``connect_timeout``).
    """

    def __init__(
        self,
        address: PostgresAddress,
        *,
        schema: str = "public",
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        lock_timeout: int = 10,
        attempts: int = 10,
        retry_wait: float = 0.2,
    ) -> None:
        self._address = address
        self._pool_size = max(1, pool_size)
        self._schema = schema
        self._connect_timeout = connect_timeout
        self._attempts = max(1, attempts)
        self._retry_wait = retry_wait
        self.channel = EVENTS_TABLE
        """The channel every inserting transaction notifies (``adapters.eventstore.listener``)."""
        name = f"{_quote(schema)}.{_quote(EVENTS_TABLE)}"
        tracking = f"{_quote(schema)}.{_quote(TRACKING_TABLE)}"
        self._ddl = [
            f"SELECT pg_advisory_xact_lock({_DDL_LOCK})",
            *([f"CREATE SCHEMA IF NOT EXISTS {_quote(schema)}"] if schema != "public" else []),
            f"CREATE TABLE IF NOT EXISTS {name} (originator_id uuid NOT NULL, "
            "originator_version bigint NOT NULL, topic text, state bytea, "
            "notification_id bigserial, PRIMARY KEY (originator_id, originator_version)) "
            + _AUTOVACUUM,
            f"CREATE UNIQUE INDEX IF NOT EXISTS {_quote(EVENTS_TABLE + '_notification_id_idx')} "
            f"ON {name} (notification_id ASC)",
            f"CREATE TABLE IF NOT EXISTS {tracking} (application_name text, "
            "notification_id bigint, PRIMARY KEY (application_name)) " + _AUTOVACUUM,
            f"INSERT INTO {tracking} VALUES ('{RESERVED_FOLLOWER}', 1) "
            "ON CONFLICT (application_name) DO NOTHING",
        ]
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
        self._job_records = (
            "SELECT notification_id, originator_id::text, originator_version, topic, state "
            f"FROM {name} WHERE originator_id = $1 ORDER BY originator_version"
        )
        self._lock = (
            f"SET LOCAL lock_timeout = '{int(lock_timeout)}s'; "
            f"LOCK TABLE {name} IN EXCLUSIVE MODE; NOTIFY {_quote(self.channel)}"
        )
        self._insert = (
            f"INSERT INTO {name} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::bytea[]) "
            "RETURNING notification_id"
        )
        self._max_id = f"SELECT MAX(notification_id) FROM {name}"
        self._position = f"SELECT notification_id FROM {tracking} WHERE application_name = $1"
        self._advance = (
            f"INSERT INTO {tracking} AS t VALUES ($1, $2) ON CONFLICT (application_name) "
            "DO UPDATE SET notification_id = excluded.notification_id "
            "WHERE t.notification_id < excluded.notification_id RETURNING notification_id"
        )
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()
        self._closed = False

    async def create_tables(self) -> None:
        """Creates the tables where missing, in one transaction; a table set the library
        wrote is used as it is."""

        async def attempt() -> None:
            async with self._connection() as connection, connection.transaction():
                for statement in self._ddl:
                    await connection.execute(statement)

        try:
            await self._retrying(attempt)
        except asyncpg.InvalidColumnReferenceError as error:
            raise Unavailable(
                f"the tracking table {self._schema}.{TRACKING_TABLE} has the multi-row layout "
                "of eventsourcing before 9.5; open the database once with Fetcher 0.1 to "
                "migrate it"
            ) from error

    async def max_notification_id(self) -> int:
        """The newest notification id, 0 when the log is empty."""

        async def attempt() -> int:
            async with self._connection() as connection:
                return int(await connection.fetchval(self._max_id) or 0)

        return await self._retrying(attempt)

    async def position(self, follower: str) -> int:
        """The follower's recorded position, 0 when it has none."""

        async def attempt() -> int:
            async with self._connection() as connection:
                return int(await connection.fetchval(self._position, follower) or 0)

        return await self._retrying(attempt)

    async def advance(self, follower: str, notification_id: int) -> bool:
        """Records the position when it is past the recorded one; False when that position
        or a later one was recorded first. One statement: safe to try again."""

        async def attempt() -> bool:
            async with self._connection() as connection:
                found = await connection.fetchval(self._advance, follower, notification_id)
            return found is not None

        return await self._retrying(attempt)

    async def ping(self) -> None:
        """One round trip, tried once: ``Unavailable`` when the database cannot be used (a
        pooled connection the database closed is replaced first, so a restart that is over
        does not read as an outage)."""
        try:
            async with asyncio.timeout(self._connect_timeout + 1), self._connection() as c:
                await c.fetchval("SELECT 1")
        except _TRANSIENT as error:
            raise Unavailable("the event store cannot be reached") from error

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection from the store's pool. asyncpg replaces one the database closed while
        it was pooled (a restart) at acquire, without a round trip; one that breaks while in
        use is closed, not reused."""
        pool = await self._connect()
        async with pool.acquire() as connection:
            try:
                yield connection
            except _BROKEN:
                connection.terminate()
                raise

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
                    server_settings={"application_name": "fetcher"},
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
            async with self._connection() as connection:
                rows = await connection.fetch(self._select, originator_id, after, up_to)
            return [StoredEvent(row[0], row[1], row[2], row[3]) for row in rows]

        return await self._retrying(attempt)

    async def select_log(self, after: int, limit: int) -> list[tuple[int, StoredEvent]]:
        """The notification log after ``after``, at most ``limit`` events, in order: each
        event with its notification id."""

        async def attempt() -> list[tuple[int, StoredEvent]]:
            async with self._connection() as connection:
                rows = await connection.fetch(self._log, after, limit)
            return [(row[0], StoredEvent(row[1], row[2], row[3], row[4])) for row in rows]

        return await self._retrying(attempt)

    async def select_records(self, after: int, limit: int) -> list[Record]:
        """The notification log after ``after`` as stored, for auditing: at most ``limit``
        records in order, the job id as text (no per-row objects but the record itself)."""

        async def attempt() -> list[Record]:
            async with self._connection() as connection:
                rows = await connection.fetch(self._records, after, limit)
            return [Record(*row) for row in rows]

        return await self._retrying(attempt)

    async def select_job_records(self, originator_id: UUID) -> list[Record]:
        """One stream's records as stored, oldest version first, with their positions."""

        async def attempt() -> list[Record]:
            async with self._connection() as connection:
                rows = await connection.fetch(self._job_records, originator_id)
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
            async with self._connection() as connection:
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
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


async def _rollback_quietly(transaction: Any) -> None:
    try:
        await transaction.rollback()
    except Exception as error:  # the original failure is the one to report
        log.debug("rollback failed: %s", error)
