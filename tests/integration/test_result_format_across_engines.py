"""One table definition and the same rows in PostgreSQL and MariaDB: both readers produce the same
JSON rows, byte for byte, in the common result format (README "Result format")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

import pytest

from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.postgres.reader import PostgresReader
from application.jobs.extraction_plan import ExtractionError, plan_datasource
from application.ports.datasource_reader import DatasourceReader
from domain.connection import Connection, Endpoint
from domain.schema import TableRead
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    drop_databases,
    extract,
    my_admin,
    my_endpoint,
    my_ident,
    parse_rows,
    pg_admin,
    pg_endpoint,
    pg_ident,
    recreate_my_database,
    recreate_pg_database,
)

DATABASE = unique_name("fetcher_formats")

# name, PostgreSQL type, MariaDB type
COLUMNS = [
    ("id", "bigint PRIMARY KEY", "BIGINT PRIMARY KEY"),
    ("small", "smallint", "SMALLINT"),
    ("n", "integer", "INT"),
    ("big", "bigint", "BIGINT"),
    ("amount", "numeric(18,2)", "DECIMAL(18,2)"),
    ("precise", "numeric(38,10)", "DECIMAL(38,10)"),
    ("ratio", "double precision", "DOUBLE"),
    ("f4", "real", "FLOAT"),
    ("active", "boolean", "BOOLEAN"),
    ("label", "text", "TEXT"),
    ("code", "varchar(20)", "VARCHAR(20)"),
    ("day", "date", "DATE"),
    ("at_local", "timestamp(6)", "DATETIME(6)"),
    ("at_utc", "timestamptz", "TIMESTAMP(6) NULL"),
    ("t", "time(6)", "TIME(6)"),
    ("ref", "uuid", "UUID"),
    ("data", "bytea", "VARBINARY(64)"),
    ("doc", "json", "JSON"),
]
HOSTILE_TABLE = "we'ird\"; DROP TABLE formats; --"
# MariaDB identifiers cannot hold characters beyond the Basic Multilingual Plane.
HOSTILE_COLUMNS = ['a"b', "c`d", "semi;colon", "-- x", "/* y */", "ünï ß", "L" * 60]

# fmt: off
ROWS: list[tuple[Any, ...]] = [
    (1, 1, 10, 2**53 + 1, Decimal("12.50"), Decimal("1234567890123456789012345678.0123456789"),
     0.30000000000000004, 1.1, True, "alpha", "A-1", date(2024, 1, 15),
     datetime(2024, 1, 15, 10, 30), datetime(2024, 1, 15, 10, 30, tzinfo=UTC),
     time(13, 14, 15, 500000), UUID("5A0E8400-E29B-41D4-A716-446655440000"), b"\x00\xff",
     '{"k": [1, 2.5, "x"], "n": null}'),
    (2, -32768, -2147483648, -(2**63), Decimal("-0.01"), Decimal("0.0000000001"), 1e300,
     3.4028234663852886e38, False, "O'Brien; DROP TABLE formats; -- \\ \"q\" <&>", "ünï😀",
     date(1000, 1, 1), datetime(2024, 1, 31, 23, 59, 59, 999999),
     datetime(2024, 2, 1, 4, 59, 59, 999000, tzinfo=UTC), time(23, 59, 59, 999999),
     UUID(int=0), b"", '[]'),
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None,
     None, None),
    (4, 32767, 2147483647, 2**63 - 1, Decimal("99999999999999.99"), Decimal("0"), -2.5,
     16777216.0, True, "", "tab\tnew\nline", date(9999, 12, 31), datetime(1970, 1, 1),
     datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC), time(0, 0), UUID(int=2**128 - 1),
     bytes(range(64)), '"s"'),
]

EXPECTED: list[dict[str, Any]] = [
    {"id": 1, "small": 1, "n": 10, "big": 9007199254740993, "amount": "12.50",
     "precise": "1234567890123456789012345678.0123456789", "ratio": 0.30000000000000004,
     "f4": 1.1, "active": True, "label": "alpha", "code": "A-1", "day": "2024-01-15",
     "at_local": "2024-01-15T10:30:00Z", "at_utc": "2024-01-15T10:30:00Z",
     "t": "13:14:15.500000", "ref": "5a0e8400-e29b-41d4-a716-446655440000", "data": "AP8=",
     "doc": {"k": [1, 2.5, "x"], "n": None}},
    {"id": 2, "small": -32768, "n": -2147483648, "big": -(2**63), "amount": "-0.01",
     "precise": "0.0000000001", "ratio": 1e300, "f4": 3.4028235e38, "active": False,
     "label": "O'Brien; DROP TABLE formats; -- \\ \"q\" <&>", "code": "ünï😀",
     "day": "1000-01-01", "at_local": "2024-01-31T23:59:59.999999Z",
     "at_utc": "2024-02-01T04:59:59.999000Z", "t": "23:59:59.999999",
     "ref": "00000000-0000-0000-0000-000000000000", "data": "", "doc": []},
    {"id": 3, **{name: None for name, _, _ in COLUMNS[1:]}},
    {"id": 4, "small": 32767, "n": 2147483647, "big": 2**63 - 1, "amount": "99999999999999.99",
     "precise": "0.0000000000", "ratio": -2.5, "f4": 16777216.0, "active": True, "label": "",
     "code": "tab\tnew\nline", "day": "9999-12-31", "at_local": "1970-01-01T00:00:00Z",
     "at_utc": "2038-01-19T03:14:07Z", "t": "00:00:00",
     "ref": "ffffffff-ffff-ffff-ffff-ffffffffffff",
     "data": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEy"
             "MzQ1Njc4OTo7PD0+Pw==",
     "doc": "s"},
]
# fmt: on


def _my_value(value: Any) -> Any:
    # aiomysql 0.3.2 cannot escape bytes with PyMySQL 1.2; binary goes in as hex (UNHEX).
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


async def _prepare_postgres() -> None:
    await recreate_pg_database(DATABASE)
    conn = await pg_admin(DATABASE)
    try:
        columns = ", ".join(f"{name} {pg_type}" for name, pg_type, _ in COLUMNS)
        await conn.execute(f"CREATE TABLE formats ({columns})")
        marks = ", ".join(f"${i}" for i in range(1, len(COLUMNS) + 1))
        await conn.executemany(f"INSERT INTO formats VALUES ({marks})", ROWS)
        hostile = ", ".join(f"{pg_ident(c)} text" for c in HOSTILE_COLUMNS)
        await conn.execute(f"CREATE TABLE {pg_ident(HOSTILE_TABLE)} (id int, {hostile})")
        await conn.executemany(
            f"INSERT INTO {pg_ident(HOSTILE_TABLE)} VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            HOSTILE_ROWS,
        )
    finally:
        await conn.close()


async def _prepare_mariadb() -> None:
    admin = await my_admin()
    try:
        async with admin.cursor() as cursor:
            await recreate_my_database(cursor, DATABASE)
            await cursor.execute("SET SESSION time_zone = '+00:00'")
            columns = ", ".join(f"{name} {my_type}" for name, _, my_type in COLUMNS)
            await cursor.execute(f"CREATE TABLE formats ({columns})")
            marks = ", ".join("UNHEX(%s)" if name == "data" else "%s" for name, _, _ in COLUMNS)
            await cursor.executemany(
                f"INSERT INTO formats VALUES ({marks})",
                [tuple(_my_value(v) for v in row) for row in ROWS],
            )
            hostile = ", ".join(f"{my_ident(c)} TEXT" for c in HOSTILE_COLUMNS)
            table = my_ident(HOSTILE_TABLE).replace("%", "%%")
            await cursor.execute(f"CREATE TABLE {my_ident(HOSTILE_TABLE)} (id INT, {hostile})")
            await cursor.executemany(
                f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", HOSTILE_ROWS
            )
    finally:
        admin.close()


HOSTILE_ROWS = [
    (1, "x", "'; DROP TABLE formats; --", "a%b", "\\", "*/", "😀", "long"),
    (2, "X", "' OR '1'='1", "a_b", "\\\\", "/*", "ü", None),
]


@dataclass(frozen=True)
class Engine:
    name: str
    reader: DatasourceReader
    endpoint: Endpoint


@pytest.fixture(scope="module")
def engines() -> Iterator[list[Engine]]:
    async def prepare() -> None:
        await asyncio.gather(_prepare_postgres(), _prepare_mariadb())

    try:
        asyncio.run(prepare())
    except BaseException:
        asyncio.run(drop_databases(DATABASE))
        raise
    try:
        yield [
            Engine("postgresql", PostgresReader(), pg_endpoint(DATABASE)),
            Engine("mariadb", MySqlReader(), my_endpoint(DATABASE)),
        ]
    finally:
        asyncio.run(drop_databases(DATABASE))


async def _extract(
    engine: Engine,
    table: str,
    fields: Sequence[str] | None = None,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None,
) -> bytes:
    schema = await engine.reader.discover(engine.endpoint, [])
    found = schema.tables[table]
    columns = found.columns if fields is None else tuple(found.column(f) for f in fields)
    read = TableRead(table, found, columns, filters or {})  # type: ignore[arg-type]
    chunks = [c async for c in extract(engine.reader, engine.endpoint, [read])]
    return b",".join(chunk.data for chunk in chunks)


async def test_both_engines_produce_the_same_rows_byte_for_byte(engines: list[Engine]) -> None:
    postgres, mariadb = [await _extract(engine, "formats") for engine in engines]
    assert parse_rows(postgres) == EXPECTED
    assert mariadb == postgres


async def test_both_engines_project_and_filter_alike(engines: list[Engine]) -> None:
    cases: list[dict[str, dict[str, tuple[Any, ...]]]] = [
        {"amount": {"gte": ("12.5",)}, "active": {"eq": (True,)}},
        {"at_utc": {"between": ("2024-01-01", "2024-02-01")}},
        {"label": {"like": ("%DROP%",)}},
        {"code": {"in": ("A-1", None)}},
        {"f4": {"eq": (1.1,)}},
        {"ref": {"gt": ("00000000-0000-0000-0000-000000000000",)}},
        {"day": {"lt": ("2000-01-01",)}, "precise": {"ne": (0,)}},
    ]
    for filters in cases:
        postgres, mariadb = [
            await _extract(engine, "formats", ["id", "label", "doc"], filters) for engine in engines
        ]
        assert mariadb == postgres, filters
        assert postgres, filters


async def test_hostile_names_and_values_match_literally_on_both_engines(
    engines: list[Engine],
) -> None:
    for engine in engines:
        everything = parse_rows(await _extract(engine, HOSTILE_TABLE))
        assert [row["id"] for row in everything] == [1, 2], engine.name
        assert everything[0]["semi;colon"] == "a%b"
        assert everything[1]["c`d"] == "' OR '1'='1"
        for column, value, expected in [
            ('a"b', "x", [1]),
            ("c`d", "'; DROP TABLE formats; --", [1]),
            ("semi;colon", "a_b", [2]),
            ("-- x", "\\\\", [2]),
            ("/* y */", "*/", [1]),
            ("ünï ß", "ü", [2]),
            ("L" * 60, "long", [1]),
        ]:
            found = await _extract(engine, HOSTILE_TABLE, ["id"], {column: {"eq": (value,)}})
            assert [row["id"] for row in parse_rows(found)] == expected, (
                engine.name,
                column,
            )
        for pattern, expected in [("a\\%b", [1]), ("a\\_b", [2]), ("a_b", [1, 2]), ("A%", [])]:
            found = await _extract(
                engine, HOSTILE_TABLE, ["id"], {"semi;colon": {"like": (pattern,)}}
            )
            assert [row["id"] for row in parse_rows(found)] == expected, (
                engine.name,
                pattern,
            )


@pytest.mark.parametrize(
    ("tables", "filters", "fragment"),
    [
        ({'formats"; --': ["id"]}, {}, "table 'formats\"; --' not found in datasource 'ds'"),
        ({"formats": ["id", "x' OR '1'='1"]}, {}, "field 'x' OR '1'='1' not found in 'ds.formats'"),
        (
            {"formats": ["id"]},
            {"formats": {"id`; --": {"eq": [1]}}},
            "filter on field 'id`; --' (operator 'eq') of table 'formats' in datasource 'ds'",
        ),
    ],
)
async def test_hostile_requested_names_fail_validation_on_both_engines(
    engines: list[Engine], tables: dict[str, list[str]], filters: dict[str, Any], fragment: str
) -> None:
    for engine in engines:
        connection = Connection(
            id=uuid4(), product_name="p", config_name="ds", type=engine.endpoint.type,
            host=engine.endpoint.host, port=engine.endpoint.port, database_name=DATABASE,
            user_name=engine.endpoint.user_name, password=None,
        )  # fmt: skip
        with pytest.raises(ExtractionError) as caught:
            await plan_datasource("ds", connection, engine.endpoint, tables, filters, engine.reader)
        assert caught.value.message.startswith(
            "engine extraction: engine: [validation] extraction request failed schema validation"
        )
        assert fragment in caught.value.message, engine.name
