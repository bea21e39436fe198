"""PostgreSQL datasource reader on asyncpg: connection test, discovery, streamed extraction.

Connection and SSL modes: ``connection``. Discovery, statements and filters: ``statements``.
Values in the common result format: ``values``. Statements run on asyncpg directly: one
``REPEATABLE READ READ ONLY`` transaction per extraction (all tables of a job see one snapshot).
Tables are read through a server-side cursor in chunks of ``chunk_rows``, each chunk encoded by
msgspec through a struct type built once per table (``adapters.datasources.common.encoding``).
With ``server_json=True``, a table whose column types the server can write in the common result
format byte for byte (``values.server_output``) is read as the server's own JSON
(``row_to_json``) through ``COPY`` instead, in chunks of about 1 MiB, with no Python work per row
(measured slower on a 2-core machine shared with the database: off by default). Tables without
rows yield nothing (reference §10.3 item 26).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Sequence
from contextlib import aclosing, asynccontextmanager, suppress
from itertools import repeat, starmap
from operator import getitem
from typing import Unpack

import asyncpg
import msgspec

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.common.reader_base import PooledReader, ReaderSettings
from adapters.datasources.postgres.connection import (
    close,
    close_pool,
    connect,
    open_pool,
    unavailable,
)
from adapters.datasources.postgres.statements import (
    DEFAULT_SCHEMA_NAME,
    DISCOVER_SQL,
    Statement,
    discovered_schema,
    select_statement,
)
from adapters.datasources.postgres.values import (
    ALL_CODEC_TYPES,
    OUTSIDE_PYTHON_RANGE,
    register_codecs,
)
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.schema import Schema, TableRead

_BEGIN_SQL = (
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
    "SET LOCAL TimeZone TO 'UTC'; SET LOCAL DateStyle TO 'ISO'; "
    "SET LOCAL IntervalStyle TO 'iso_8601'; "
    "SET LOCAL extra_float_digits TO 3"
)


_STATEMENTS_KEPT = 512
"""Statements a reader keeps for reads that come again (least recently used dropped)."""


def _read_key(database: str, read: TableRead) -> Hashable | None:
    """What a statement depends on, or None when a filter value cannot be a key."""
    filters = tuple(
        (name, tuple(sorted(conditions.items())))
        for name, conditions in sorted(read.filters.items())
    )
    key = (database, read.result_key, read.table, read.columns, filters)
    try:
        hash(key)
    except TypeError:
        return None
    return key


async def _with_codecs(connection: asyncpg.Connection) -> None:
    """Every decoder the extraction needs, registered once per connection."""
    await register_codecs(connection, ALL_CODEC_TYPES)


_OUTSIDE_RANGE_MESSAGE = (
    "failed to read datasource rows: a date/time value is outside Python's range"
)
_COPY_CHUNK_BYTES = 1024 * 1024
_COPY_BUFFERS = 64
# record[:] is the record's values as a tuple, built in C: a row type called with that tuple
# costs about 40 % less than called with the record, which it unpacks through its iterator.
_EVERY_VALUE = slice(None)


def _copied_chunk(key: str, lines: bytes) -> RowChunk:
    """Whole COPY lines (each ending in a newline) as a chunk of comma-separated rows."""
    rows = lines.count(b"\n")
    data = lines[:-1].replace(b"\n", b",").replace(b"\\\\", b"\\")
    return RowChunk(result_key=key, data=data, rows=rows)


class PostgresReader(PooledReader[Statement, asyncpg.Pool, asyncpg.Connection]):
    """Reads PostgreSQL datasources. Discovery and extraction of a stored connection lease a
    connection from its pool (``common.pools``); ``test`` always opens a fresh one, so it
    proves the credentials as they are now."""

    # The connections and pools of ``connection``: its errors, connect and close.
    _unavailable = staticmethod(unavailable)
    _connect = staticmethod(connect)
    _close = staticmethod(close)
    _close_pool = staticmethod(close_pool)

    def __init__(self, *, server_json: bool = False, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._encoder = msgspec.json.Encoder()
        self._server_json = server_json
        self._statements: OrderedDict[Hashable, Statement | None] = OrderedDict()

    async def _ping(self, connection: asyncpg.Connection) -> None:
        await connection.fetchval("SELECT 1")

    async def _open_pool(self, endpoint: Endpoint, size: int, idle_seconds: float) -> asyncpg.Pool:
        return await open_pool(endpoint, size, idle_seconds, self._connect_timeout, _with_codecs)

    async def _open(self, endpoint: Endpoint) -> asyncpg.Connection:
        """A connection like a pooled one: with the extraction's codecs."""
        connection = await connect(endpoint, self._connect_timeout)
        try:
            await _with_codecs(connection)
        except BaseException:
            await close(connection)
            raise
        return connection

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        schemas = list(scope) or [endpoint.schema or DEFAULT_SCHEMA_NAME]
        records = await self._discovered(
            endpoint, lambda connection: connection.fetch(DISCOVER_SQL, schemas)
        )
        return discovered_schema(records)

    def statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        """The read's statement; the same read of the same database again (a job repeated,
        the same filter values) reuses the one built before, as building one (SQLAlchemy's
        compiler) costs more CPU than running a small read. Statements hold SQL text, values
        and a row type, nothing of a connection or its credentials."""
        key = _read_key(endpoint.database_name, read)
        if key is None:
            return select_statement(endpoint, read, server_json=self._server_json)
        if key in self._statements:
            self._statements.move_to_end(key)
            return self._statements[key]
        built = select_statement(endpoint, read, server_json=self._server_json)
        self._statements[key] = built
        if len(self._statements) > _STATEMENTS_KEPT:
            self._statements.popitem(last=False)
        return built

    @asynccontextmanager
    async def _session(self, endpoint: Endpoint) -> AsyncIterator[asyncpg.Connection]:
        """A leased connection in one ``REPEATABLE READ READ ONLY`` transaction, rolled back
        after (a pooled connection goes back without the snapshot)."""
        async with self._pools.connection(endpoint) as connection:
            try:
                await connection.execute(_BEGIN_SQL, timeout=self._query_timeout)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
                raise DatasourceQueryFailed() from error
            try:
                yield connection
            finally:
                with suppress(Exception):
                    await connection.execute("ROLLBACK", timeout=self._query_timeout)

    async def _stream(
        self, connection: asyncpg.Connection, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        if statement.json_sql is not None:
            chunks = self._copied(connection, statement.json_sql, statement)
        else:
            chunks = self._encoded(connection, statement)
        async with aclosing(chunks) as stream:
            async for chunk in stream:
                yield chunk

    async def _copied(
        self, connection: asyncpg.Connection, sql: str, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        """The server's JSON of each row through ``COPY ... TO STDOUT`` (text format: one row a
        line, each backslash doubled, nothing else escaped since the JSON holds no control
        characters), joined by commas in chunks of about ``_COPY_CHUNK_BYTES``. At most
        ``_COPY_BUFFERS`` buffers wait between the copy and the consumer: a slow consumer
        stops the copy reading from the socket."""
        slots = asyncio.Semaphore(_COPY_BUFFERS)
        buffers: asyncio.Queue[bytes | None] = asyncio.Queue()

        async def sink(data: bytes) -> None:
            await slots.acquire()
            buffers.put_nowait(data)

        async def copy() -> None:
            try:
                await connection.copy_from_query(sql, *statement.params, output=sink)
            finally:
                buffers.put_nowait(None)

        task = asyncio.create_task(copy())
        key = statement.result_key
        pending: list[bytes] = []
        size = 0
        try:
            while (data := await buffers.get()) is not None:
                slots.release()
                pending.append(data)
                size += len(data)
                if size >= _COPY_CHUNK_BYTES:
                    joined = b"".join(pending)
                    end = joined.rfind(b"\n") + 1
                    pending, size = [joined[end:]], len(joined) - end
                    if end:
                        yield _copied_chunk(key, joined[:end])
            await task
            rest = b"".join(pending)
            if rest:
                yield _copied_chunk(key, rest)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
            if OUTSIDE_PYTHON_RANGE in str(error):  # as the Python path fails on such values
                raise DatasourceQueryFailed(_OUTSIDE_RANGE_MESSAGE) from error
            raise DatasourceQueryFailed() from error
        finally:
            if not task.done():
                task.cancel()
                with suppress(BaseException):
                    await task

    async def _encoded(
        self, connection: asyncpg.Connection, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        encode = self._encoder.encode
        row = statement.row
        size = self._chunk_rows
        try:
            cursor = await connection.cursor(
                statement.sql, *statement.params, timeout=self._query_timeout
            )
            while True:
                with paused_gc():
                    records = await cursor.fetch(size, timeout=self._query_timeout)
                    # Until this task next yields to the loop, the loop's handle that woke it
                    # holds the fetched list (through the finished future): let it go, so that
                    # the records are freed at ``del`` below instead of outliving the pause
                    # and being traversed by the GC's next collection (~2-5 ms a chunk).
                    await asyncio.sleep(0)
                    count = len(records)
                    values = map(getitem, records, repeat(_EVERY_VALUE))
                    data = encode(list(starmap(row, values)))[1:-1] if count else b""
                    del records
                if count:
                    yield RowChunk(result_key=statement.result_key, data=data, rows=count)
                if count < size:
                    return
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
            raise DatasourceQueryFailed() from error
        except (ValueError, OverflowError) as error:  # asyncpg cannot decode BC dates, 24:00
            raise DatasourceQueryFailed(_OUTSIDE_RANGE_MESSAGE) from error
