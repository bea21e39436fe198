"""Timestamps read by ``PostgresReader`` (decoded from their text in a UTC, ISO session) give the
bytes that asyncpg's own binary decoder gives, encoded by msgspec, whatever the database's
``DateStyle`` and ``TimeZone``. A database of its own, dropped at the end."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import msgspec
import pytest

from adapters.datasources.postgres.reader import PostgresReader
from application.errors import DatasourceQueryFailed
from domain.connection import Endpoint
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    PG_HOST,
    PG_PORT,
    extract,
    pg_admin,
    pg_endpoint,
    pg_ident,
    recreate_pg_database,
    table_read,
)

DATABASE = unique_name("fetcher_ts_test")

STAMPS = [
    "'2024-01-02 03:04:05+00'",
    "'2024-01-02 03:04:05.1+00'",
    "'2024-01-02 03:04:05.12+00'",
    "'2024-01-02 03:04:05.123456+00'",
    "'2024-01-02 03:04:05.000001+00'",
    "'2024-06-30 23:30:00-05:30'",
    "'2024-01-01 00:00:00.5+14'",
    "'1883-11-18 12:03:58-04:56:02'",
    "'0001-01-01 00:00:00+00'",
    "'0999-12-31 23:59:59.999999+00'",
    "'9999-12-31 23:59:59.999999+00'",
    "'infinity'",
    "'-infinity'",
    "NULL",
]

SETUP = f"""
CREATE TABLE stamps (id integer, tz timestamptz, naive timestamp, tzs timestamptz[],
                     naives timestamp[]);
INSERT INTO stamps
SELECT n, s, s AT TIME ZONE 'UTC', ARRAY[s, NULL, 'infinity', s],
       ARRAY[s AT TIME ZONE 'UTC', '-infinity']
FROM unnest(ARRAY[{", ".join(f"{s}::timestamptz" for s in STAMPS)}]) WITH ORDINALITY AS t(s, n);
INSERT INTO stamps VALUES (0, NULL, NULL, '{{}}', NULL);
CREATE TABLE stamp_bc (t timestamptz);
INSERT INTO stamp_bc VALUES ('0044-03-15 12:00:00+00 BC');
CREATE TABLE stamp_far (t timestamptz);
INSERT INTO stamp_far VALUES ('10000-01-01 00:00:00+00');
"""

# What the reader selects each column as (timestamps as timestamptz), read with asyncpg's
# own decoders.
BINARY_SQL = "SELECT id, tz, naive::timestamptz, tzs, naives::timestamptz[] FROM stamps ORDER BY id"


async def _prepare() -> None:
    await recreate_pg_database(DATABASE)
    admin = await pg_admin()
    try:
        # Neither the reader's nor asyncpg's output may depend on these.
        await admin.execute(
            f"ALTER DATABASE {pg_ident(DATABASE)} SET DateStyle TO 'SQL, DMY'; "
            f"ALTER DATABASE {pg_ident(DATABASE)} SET TimeZone TO 'Asia/Kolkata'"
        )
    finally:
        await admin.close()
    conn = await pg_admin(DATABASE)
    try:
        await conn.execute(SETUP)
    finally:
        await conn.close()


async def _drop() -> None:
    admin = await pg_admin()
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {pg_ident(DATABASE)} WITH (FORCE)")
    finally:
        await admin.close()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    try:
        asyncio.run(_prepare())
    except OSError as error:
        pytest.fail(f"PostgreSQL is not reachable at {PG_HOST}:{PG_PORT} ({error})", pytrace=False)
    try:
        yield pg_endpoint(DATABASE)
    finally:
        asyncio.run(_drop())


async def _read(endpoint: Endpoint, table: str) -> bytes:
    reader = PostgresReader()
    try:
        schema = await reader.discover(endpoint, [])
        read = table_read(schema, table)
        return b",".join([chunk.data async for chunk in extract(reader, endpoint, [read])])
    finally:
        await reader.aclose()


async def _binary_rows() -> bytes:
    """The rows as asyncpg's binary decoders give them, as the reader encodes rows."""
    conn = await pg_admin(DATABASE)
    try:
        await conn.execute("SET TimeZone TO 'UTC'")  # as the reader's session
        records = await conn.fetch(BINARY_SQL)
    finally:
        await conn.close()
    rows = [
        {"id": i, "naive": naive, "naives": naives, "tz": tz, "tzs": tzs}
        for i, tz, naive, tzs, naives in records
    ]
    return msgspec.json.encode(rows)


async def test_timestamps_give_the_bytes_of_the_binary_decoder(endpoint: Endpoint) -> None:
    read = await _read(endpoint, "stamps")
    rows = sorted(msgspec.json.decode(b"[" + read + b"]"), key=lambda row: row["id"])
    assert len(rows) == len(STAMPS) + 1
    assert msgspec.json.encode(rows) == await _binary_rows()
    assert b'"2024-01-02T03:04:05.120000Z"' in read
    assert b'"2024-07-01T05:00:00Z"' in read
    assert b'"9999-12-31T23:59:59.999999"' in read  # infinity, as asyncpg gives it
    assert b'"0001-01-01T00:00:00"' in read


@pytest.mark.parametrize("table", ["stamp_bc", "stamp_far"])
async def test_timestamps_python_cannot_hold_fail_the_query(endpoint: Endpoint, table: str) -> None:
    with pytest.raises(DatasourceQueryFailed) as caught:
        await _read(endpoint, table)
    assert "date/time value is outside" in str(caught.value)


async def test_a_timestamptz_filter_binds_through_the_text_encoder(endpoint: Endpoint) -> None:
    reader = PostgresReader()
    try:
        schema = await reader.discover(endpoint, [])
        read = table_read(
            schema, "stamps", ["id"], {"tz": {"between": ("2024-01-02T03:04:05.1Z", "2024-01-02")}}
        )
        data = b",".join([chunk.data async for chunk in extract(reader, endpoint, [read])])
    finally:
        await reader.aclose()
    assert sorted(row["id"] for row in msgspec.json.decode(b"[" + data + b"]")) == [2, 3, 4]
