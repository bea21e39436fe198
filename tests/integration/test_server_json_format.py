"""Where PostgreSQL builds the result JSON itself (``row_to_json`` through COPY), it writes the same
bytes as the Python encoder, type by type: for every type of the README's table, the server path,
the Python path and (for the types both engines have) MariaDB's reader give identical bytes. Types
the server cannot write identically stay on the Python path."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.postgres.reader import PostgresReader
from application.errors import DatasourceQueryFailed
from domain.connection import Endpoint
from domain.schema import TableRead
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    drop_databases,
    extract,
    my_endpoint,
    parse_rows,
    pg_admin,
    pg_endpoint,
    sessions_settle,
)
from tests.integration.test_result_format_across_engines import (
    COLUMNS,
    HOSTILE_TABLE,
    _prepare_mariadb,
    _prepare_postgres,
)

DATABASE = unique_name("fetcher_formats")  # the shared format test's tables, in their database

# Types of the README's PostgreSQL table beyond the shared one, with values at their edges:
# name, type, SQL literals of the rows (row i gets value i, NULL last).
# fmt: off
PG_ONLY = [
    ("fixed", "char(5)", ["'ab'", "''", "'abcde'"]),
    ("nm", "name", ["'pg_name'", "'ünï'", "''"]),
    ("docb", "jsonb", ['\'{"b": 1, "a": [1, "x\\n\\u0001"]}\'', "'[]'", "'\"é\"'"]),
    ("num", "numeric", ["'NaN'", "'-0.000100'", "'123456789012345678901234567890.5'"]),
    ("span", "interval", ["'1 year 2 months 3 days 04:05:06.5'", "'-1 day'", "'0'"]),
    ("addr", "inet", ["'192.168.0.1/24'", "'::1'", "'10.0.0.1'"]),
    ("mood", "ds_mood", ["'happy'", "'sad'", "'happy'"]),
    ("day_inf", "date", ["'infinity'", "'-infinity'", "'0001-01-01'"]),
    ("ts_inf", "timestamptz", ["'infinity'", "'-infinity'", "'0001-01-01 00:00:00+00'"]),
    (
        "ts_frac",
        "timestamp(6)",
        ["'2024-01-02 03:04:05.12'", "'2024-01-02 03:04:05'", "'9999-12-31 23:59:59.999999'"],
    ),
    (
        "tz_offset",
        "timestamptz",
        [
            "'2024-06-30 23:30:00-05:30'",
            "'2024-01-01 00:00:00.000001+14'",
            "'1999-12-31 23:59:59.5+00'",
        ],
    ),
    ("blob", "bytea", ["decode(repeat('00ff10', 40), 'hex')", "''::bytea", "'\\x2f'::bytea"]),
    ("ctl", "text", ["E'\\x01\\x1f\\x7f\\u2028 \"q\" \\\\ /'", "'😀'", "E'\\t\\r\\n\\b\\f'"]),
    ("tags", "text[]", ["'{a,\"b c\"}'", "'{}'", "'{NULL}'"]),
    ("clock", "time", ["'13:14:15.5'", "'00:00'", "'23:59:59.999999'"]),
    ("doc", "json", ["E'{\"a\":\\n\\t1}'", "'[]'", "'null'"]),
    ("f8", "double precision", ["'1e100'", "'NaN'", "'-0.5'"]),
]
# fmt: on
PYTHON_ONLY = {"tags", "clock", "doc", "f8", "ratio", "f4", "t"}
"""Columns whose type the server does not write identically: read by the Python path."""


async def _prepare_only_pg() -> None:
    conn = await pg_admin(DATABASE)
    try:
        await conn.execute("CREATE TYPE ds_mood AS ENUM ('sad', 'happy')")
        columns = ", ".join(f"{name} {sql_type}" for name, sql_type, _ in PG_ONLY)
        await conn.execute(f"CREATE TABLE only_pg (id integer PRIMARY KEY, {columns})")
        for i in range(3):
            values = ", ".join(literals[i] for _, _, literals in PG_ONLY)
            await conn.execute(f"INSERT INTO only_pg VALUES ({i + 1}, {values})")
        nulls = ", ".join("NULL" for _ in PG_ONLY)
        await conn.execute(f"INSERT INTO only_pg VALUES (4, {nulls})")
        await conn.execute("CREATE TABLE outside (id integer, d date)")
        await conn.execute("INSERT INTO outside VALUES (1, '2024-01-01'), (2, '0044-03-15 BC')")
        await conn.execute(
            "CREATE TABLE many AS SELECT g AS id, repeat('x', 40) || g AS label "
            "FROM generate_series(1, 100000) g"
        )
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def databases() -> Iterator[None]:
    async def prepare() -> None:
        await asyncio.gather(_prepare_postgres(), _prepare_mariadb())
        await _prepare_only_pg()

    try:
        asyncio.run(prepare())
        yield
    finally:
        asyncio.run(drop_databases(DATABASE))


def _server() -> PostgresReader:
    return PostgresReader(server_json=True)


async def _read(
    reader: PostgresReader | MySqlReader, endpoint: Endpoint, table: str, fields: list[str]
) -> tuple[bytes, bool]:
    """The bytes of ``fields`` of ``table``, and whether the server built them."""
    schema = await reader.discover(endpoint, [])
    found = schema.tables[table]
    read = TableRead(table, found, tuple(found.column(f) for f in fields), {})  # type: ignore[arg-type]
    prepared = reader.prepare(endpoint, [read])
    on_server = getattr(prepared.steps[0], "json_sql", None) is not None
    chunks = [c async for c in reader.stream(endpoint, prepared)]
    return b",".join(chunk.data for chunk in chunks), on_server


@pytest.mark.parametrize("name", [name for name, _, _ in COLUMNS[1:]])
async def test_each_shared_type_gives_the_same_bytes_on_both_paths_and_engines(
    databases: None, name: str
) -> None:
    endpoint = pg_endpoint(DATABASE)
    server, on_server = await _read(_server(), endpoint, "formats", ["id", name])
    python, on_python = await _read(PostgresReader(), endpoint, "formats", ["id", name])
    mariadb, _ = await _read(MySqlReader(), my_endpoint(DATABASE), "formats", ["id", name])
    assert on_server is (name not in PYTHON_ONLY)
    assert not on_python
    assert server == python == mariadb
    assert len(parse_rows(server)) == 4


@pytest.mark.parametrize("name", [name for name, _, _ in PG_ONLY])
async def test_each_postgresql_type_gives_the_same_bytes_on_both_paths(
    databases: None, name: str
) -> None:
    endpoint = pg_endpoint(DATABASE)
    server, on_server = await _read(_server(), endpoint, "only_pg", ["id", name])
    python, _ = await _read(PostgresReader(), endpoint, "only_pg", ["id", name])
    assert on_server is (name not in PYTHON_ONLY)
    assert server == python
    assert parse_rows(server)[3] == {"id": 4, name: None}


async def test_whole_tables_and_hostile_names_give_the_same_bytes(databases: None) -> None:
    endpoint = pg_endpoint(DATABASE)
    for table in (HOSTILE_TABLE, "only_pg", "formats"):
        schema = await _server().discover(endpoint, [])
        fields = [c.name for c in schema.tables[table].columns]
        server, on_server = await _read(_server(), endpoint, table, fields)
        python, _ = await _read(PostgresReader(), endpoint, table, fields)
        assert server == python, table
        assert on_server is (table == HOSTILE_TABLE)  # the others hold a Python-only type


async def test_a_value_python_cannot_read_fails_the_server_path_alike(databases: None) -> None:
    endpoint = pg_endpoint(DATABASE)
    for reader in (_server(), PostgresReader()):
        with pytest.raises(DatasourceQueryFailed) as caught:
            await _read(reader, endpoint, "outside", ["id", "d"])
        assert "date/time value is outside Python's range" in str(caught.value)


async def test_the_server_path_streams_in_order_and_bounded_chunks(databases: None) -> None:
    endpoint = pg_endpoint(DATABASE)
    reader = _server()
    data, on_server = await _read(reader, endpoint, "many", ["id", "label"])
    assert on_server
    rows = parse_rows(data)
    assert [row["id"] for row in rows] == list(range(1, 100_001))
    schema = await reader.discover(endpoint, [])
    found = schema.tables["many"]
    chunks = [c async for c in extract(reader, endpoint, [TableRead("many", found, found.columns)])]
    assert len(chunks) > 2
    assert all(len(c.data) < 2 * 1024 * 1024 for c in chunks)
    assert sum(c.rows for c in chunks) == 100_000
    assert all(len(parse_rows(c.data)) == c.rows for c in chunks)


async def _open_sessions() -> int:
    admin = await pg_admin()
    try:
        return int(
            await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
                "AND application_name = 'fetcher'",
                DATABASE,
            )
        )
    finally:
        await admin.close()


async def test_stopping_the_server_path_early_ends_the_copy_and_the_session(
    databases: None,
) -> None:
    endpoint = pg_endpoint(DATABASE)
    reader = _server()
    schema = await reader.discover(endpoint, [])
    found = schema.tables["many"]
    assert await sessions_settle(_open_sessions, 0) == 0
    stream = extract(reader, endpoint, [TableRead("many", found, found.columns)])
    assert isinstance(stream, AsyncIterator)
    first = await anext(stream)
    assert first.rows > 0
    assert await _open_sessions() == 1
    await stream.aclose()  # type: ignore[attr-defined]
    assert await sessions_settle(_open_sessions, 0) == 0
