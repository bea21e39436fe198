"""Filters run in the database: on a 1,000,000-row table a selective filter returns its few rows
in less than half the time the same reader would take to stream the whole table, so the rows
cannot have been filtered after reading them all.

The whole-table time is estimated in each test, just before the filtered read, from the
reader streaming the table's first rows without a filter: both run under the same load, so
the comparison holds on a busy machine as on an idle one. No absolute time is asserted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.postgres.reader import PostgresReader
from application.ports.datasource_reader import DatasourceReader
from domain.connection import Endpoint
from domain.schema import Table, TableRead
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    drop_databases,
    extract,
    my_admin,
    my_endpoint,
    parse_rows,
    pg_admin,
    pg_endpoint,
    recreate_my_database,
    recreate_pg_database,
)

DATABASE = unique_name("fetcher_scale")
ROWS = 1_000_000

PG_SETUP = [
    """CREATE TABLE big (id bigint PRIMARY KEY, email varchar(64) NOT NULL,
       amount numeric(18,2) NOT NULL, at timestamptz NOT NULL, active boolean NOT NULL)""",
    f"""INSERT INTO big
        SELECT i, 'user' || i || '@example.com', i / 100.0,
               timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second', i % 2 = 0
        FROM generate_series(1, {ROWS}) AS i""",
    "CREATE INDEX big_email ON big (email)",
    "ANALYZE big",
]
# A recursive CTE would need a raised recursion limit on MySQL; a cross join of digits does not.
_THOUSAND = (
    "(SELECT a.d + 10 * b.d + 100 * c.d AS n FROM "
    + ", ".join(
        f"(SELECT 0 d UNION ALL {' UNION ALL '.join(f'SELECT {i}' for i in range(1, 10))}) {t}"
        for t in "abc"
    )
    + ")"
)
MY_SETUP = [
    """CREATE TABLE big (id BIGINT PRIMARY KEY, email VARCHAR(64) NOT NULL,
       amount DECIMAL(18,2) NOT NULL, at TIMESTAMP NOT NULL, active BOOLEAN NOT NULL,
       KEY big_email (email))""",
    "SET SESSION time_zone = '+00:00'",
    f"""INSERT INTO big
        SELECT n, CONCAT('user', n, '@example.com'), n / 100,
               TIMESTAMP '2024-01-01 00:00:00' + INTERVAL n SECOND, n % 2 = 0
        FROM (SELECT low.n + 1000 * high.n + 1 AS n FROM {_THOUSAND} low, {_THOUSAND} high) s""",
    "ANALYZE TABLE big",
]


BASELINE_ROWS = 100_000


@dataclass(frozen=True)
class Engine:
    name: str
    reader: DatasourceReader
    endpoint: Endpoint
    table: Table


async def _prepare_postgres() -> Endpoint:
    await recreate_pg_database(DATABASE)
    conn = await pg_admin(DATABASE)
    try:
        for statement in PG_SETUP:
            await conn.execute(statement)
        assert await conn.fetchval("SELECT count(*) FROM big") == ROWS
    finally:
        await conn.close()
    return pg_endpoint(DATABASE)


async def _prepare_mariadb() -> Endpoint:
    conn = await my_admin()
    try:
        async with conn.cursor() as cursor:
            await recreate_my_database(cursor, DATABASE)
            for statement in MY_SETUP:
                await cursor.execute(statement)
                await cursor.fetchall()
            await cursor.execute("SELECT count(*) FROM big")
            assert await cursor.fetchone() == (ROWS,)
    finally:
        conn.close()
    return my_endpoint(DATABASE)


@pytest.fixture(scope="session")
def big_tables() -> Iterator[dict[str, Engine]]:
    """The 1,000,000-row table in both engines, loaded at the same time, once per session."""

    async def prepare() -> dict[str, Engine]:
        pg_endpoint, my_endpoint = await asyncio.gather(_prepare_postgres(), _prepare_mariadb())
        engines = {}
        for name, reader, endpoint in [
            ("postgresql", PostgresReader(), pg_endpoint),
            ("mariadb", MySqlReader(), my_endpoint),
        ]:
            schema = await reader.discover(endpoint, [])
            engines[name] = Engine(name, reader, endpoint, schema.tables["big"])
        return engines

    try:
        yield asyncio.run(prepare())
    finally:
        asyncio.run(drop_databases(DATABASE))


def _read(engine: Engine, filters: Mapping[str, Mapping[str, tuple[Any, ...]]]) -> TableRead:
    columns = tuple(c for c in engine.table.columns if c.name in ("id", "email"))
    return TableRead("big", engine.table, columns, filters)


async def _timed_extract(
    engine: Engine, filters: Mapping[str, Mapping[str, tuple[Any, ...]]]
) -> tuple[float, list[dict[str, Any]]]:
    """(seconds, the rows) of reading ``(id, email)`` with ``filters``."""
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    async for chunk in extract(engine.reader, engine.endpoint, [_read(engine, filters)]):
        rows.extend(parse_rows(chunk.data))
    return time.perf_counter() - started, rows


async def _whole_table_estimate(engine: Engine) -> float:
    """Seconds the reader would take to stream every row of ``(id, email)``, extrapolated from
    streaming the first ``BASELINE_ROWS`` rows without a filter, now."""
    count = 0
    started = time.perf_counter()
    async with aclosing(extract(engine.reader, engine.endpoint, [_read(engine, {})])) as chunks:  # type: ignore[type-var]
        async for chunk in chunks:
            count += chunk.rows
            if count >= BASELINE_ROWS:
                break
    elapsed = time.perf_counter() - started
    assert count >= BASELINE_ROWS
    return elapsed * ROWS / count


CASES = [
    pytest.param({"id": {"between": (500_000, 500_004)}}, [500_000 + i for i in range(5)],
                 id="primary key range"),
    pytest.param({"email": {"eq": ("user777777@example.com", "USER1@example.com")}}, [777_777],
                 id="indexed text, exact case"),
    pytest.param({"amount": {"eq": ("1234.56",)}}, [123_456], id="unindexed decimal"),
    pytest.param({"at": {"between": ("2024-01-12T13:46:40Z", "2024-01-12T13:46:42Z")},
                  "active": {"eq": (True,)}}, [1_000_000], id="timestamp and boolean"),
    pytest.param({"email": {"like": ("USER%",)}}, [], id="case-sensitive like, no match"),
]  # fmt: skip


@pytest.mark.parametrize("engine_name", ["postgresql", "mariadb"])
@pytest.mark.parametrize(("filters", "expected"), CASES)
async def test_selective_filter_on_a_million_rows_runs_in_the_database(
    big_tables: dict[str, Engine],
    engine_name: str,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    engine = big_tables[engine_name]
    whole_table = await _whole_table_estimate(engine)
    elapsed, rows = await _timed_extract(engine, filters)
    assert sorted(row["id"] for row in rows) == expected
    assert elapsed < whole_table / 2, (
        f"{engine_name}: {elapsed:.3f} s, streaming everything would take {whole_table:.3f} s"
    )
