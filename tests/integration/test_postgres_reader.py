"""PostgresReader against the real PostgreSQL on loopback (a database of its own, dropped at the
end)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import ssl
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from adapters.datasources.postgres import reader as reader_module
from adapters.datasources.postgres.connection import ssl_argument
from adapters.datasources.postgres.reader import PostgresReader
from application.errors import (
    DatasourceError,
    DatasourceQueryFailed,
    DatasourceUnavailable,
    InvalidSslMode,
)
from domain.connection import Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    PG_HOST,
    PG_PORT,
    assert_discovery_times_out,
    assert_stopping_early_closes_the_connection,
    endpoint_with,
    extract,
    extract_rows,
    parse,
    pg_admin,
    pg_endpoint,
    recreate_pg_database,
    self_signed_certificate,
    sessions_settle,
    table_read,
)

DATABASE = unique_name("fetcher_ds_test")
HOSTILE = "O'Brien; DROP TABLE ds_types; --"

SETUP = r"""
DROP TABLE IF EXISTS ds_types, ds_big, ds_empty, ds_misc, ds_bc CASCADE;
DROP VIEW IF EXISTS ds_view;
DROP SCHEMA IF EXISTS ds_sales CASCADE;
DROP TYPE IF EXISTS ds_mood;
CREATE TYPE ds_mood AS ENUM ('sad', 'happy');
CREATE TABLE ds_types (
    id bigint PRIMARY KEY,
    n integer,
    amount numeric(18,2),
    label text,
    code varchar(20),
    active boolean,
    day date,
    at_tz timestamptz,
    at_local timestamp,
    ref uuid,
    blob bytea,
    doc jsonb,
    ratio double precision,
    tags text[],
    "Mixed Case" text,
    "order" integer
);
INSERT INTO ds_types VALUES
 (1, 10, 12.50, 'alpha', 'A-1', true, '2024-01-15', '2024-01-15 10:30:00+00',
  '2024-01-15 10:30:00', '00000000-0000-0000-0000-000000000001', '\x00ff',
  '{"k": [1, 2.5, "x"], "n": null}', 0.5, '{a,b}', 'Upper', 3),
 (2, 20, -0.01, 'beta', 'B_2', false, '2024-01-31', '2024-01-31 23:59:59.999+00',
  '2024-01-31 23:59:59.5', '00000000-0000-0000-0000-000000000002', '', '[]', 'NaN', '{}',
  'lower', 1),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (4, 40, 99999999999999.99, 'O''Brien; DROP TABLE ds_types; --', 'ünï😀', true, '2024-02-01',
  '2024-02-01 00:00:00+05', '2024-02-01 00:00:00', '00000000-0000-0000-0000-000000000004',
  '\x41', '{"quote": "a\"b <&>"}', 1e300, '{"x y","\"q\""}', 'x', 2),
 (5, 50, 0, 'a%b_c', '100%', false, '2023-12-31', '2023-12-31 12:00:00+00',
  '2023-12-31 12:00:00', '00000000-0000-0000-0000-000000000005', '\x', '"s"', '-Infinity',
  NULL, NULL, 5);
CREATE TABLE ds_big (id bigint, label text);
INSERT INTO ds_big SELECT i, 'row ' || i FROM generate_series(1, 25000) AS i;
CREATE TABLE ds_empty (id bigint);
CREATE TABLE ds_misc (
    iv interval, ip inet, t time, r int4range, mood ds_mood, f4 real, nums numeric[],
    stamps timestamp[], big numeric, tiny numeric
);
INSERT INTO ds_misc VALUES ('1 year 2 mons 3 days 04:05:06.5', '10.0.0.1/8', '13:14:15.5',
  '[1,5)', 'happy', 1.1, '{1.50,NaN}', '{"2024-01-01 10:00:00"}', 123456789012345678901234567890,
  0.00000001);
CREATE TABLE ds_bc (d date);
INSERT INTO ds_bc VALUES ('0044-03-15 BC');
CREATE VIEW ds_view AS SELECT id FROM ds_types;
CREATE SCHEMA ds_sales;
CREATE TABLE ds_sales.orders (id integer, total numeric(10,2));
INSERT INTO ds_sales.orders VALUES (7, 70.00);
CREATE TABLE ds_sales."Mixed Table" ("Id" integer);
INSERT INTO ds_sales."Mixed Table" VALUES (1);
"""


async def _prepare() -> None:
    await recreate_pg_database(DATABASE)
    conn = await pg_admin(DATABASE)
    try:
        await conn.execute(SETUP)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    try:
        asyncio.run(_prepare())
    except OSError as error:
        pytest.fail(f"PostgreSQL is not reachable at {PG_HOST}:{PG_PORT} ({error})", pytrace=False)
    try:
        yield pg_endpoint(DATABASE, password="unused-with-trust-auth")
    finally:
        asyncio.run(_drop())


async def _drop() -> None:
    admin = await pg_admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
def reader() -> PostgresReader:
    return PostgresReader()


async def read_table(
    reader: PostgresReader,
    endpoint: Endpoint,
    name: str,
    fields: Sequence[str] | None = None,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None,
) -> list[dict[str, Any]]:
    schema = await reader.discover(endpoint, ["public", "ds_sales"])
    return await extract_rows(reader, endpoint, table_read(schema, name, fields, filters))


async def ids(
    reader: PostgresReader, endpoint: Endpoint, filters: Mapping[str, Mapping[str, tuple[Any, ...]]]
) -> list[int]:
    return [row["id"] for row in await read_table(reader, endpoint, "ds_types", ["id"], filters)]


# --- discovery -------------------------------------------------------------------------------


async def test_discover_lists_public_tables_with_typed_columns_in_order(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_types"]
    assert table.schema == "public"
    assert table.name == "ds_types"
    assert [(c.name, c.data_type) for c in table.columns] == [
        ("id", "bigint"),
        ("n", "integer"),
        ("amount", "numeric"),
        ("label", "text"),
        ("code", "character varying"),
        ("active", "boolean"),
        ("day", "date"),
        ("at_tz", "timestamp with time zone"),
        ("at_local", "timestamp without time zone"),
        ("ref", "uuid"),
        ("blob", "bytea"),
        ("doc", "jsonb"),
        ("ratio", "double precision"),
        ("tags", "_text"),
        ("Mixed Case", "text"),
        ("order", "integer"),
    ]
    assert [c.data_type for c in schema.tables["ds_misc"].columns] == [
        "interval", "inet", "time without time zone", "int4range", "ds_mood", "real",
        "_numeric", "_timestamp", "numeric", "numeric",
    ]  # fmt: skip
    assert schema.tables["ds_empty"].columns == (Column("id", "bigint"),)


async def test_discover_leaves_out_views_other_schemas_and_system_tables(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    assert "ds_view" not in schema.tables
    assert not [name for name in schema.tables if name.startswith("ds_sales.")]
    assert not [name for name in schema.tables if name.startswith(("pg_", "information_schema"))]
    system = await reader.discover(endpoint, ["pg_catalog", "information_schema"])
    assert system.tables == {}


async def test_discover_scope_selects_schemas_and_qualifies_non_public_names(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    both = await reader.discover(endpoint, ["public", "ds_sales"])
    assert {"ds_types", "ds_sales.orders", "ds_sales.Mixed Table"} <= set(both.tables)
    assert both.tables["ds_sales.orders"].schema == "ds_sales"
    assert both.tables["ds_sales.orders"].name == "orders"
    only_sales = await reader.discover(endpoint, ["ds_sales"])
    assert set(only_sales.tables) == {"ds_sales.orders", "ds_sales.Mixed Table"}


async def test_discover_empty_scope_uses_the_connection_schema(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    sales = endpoint_with(endpoint, schema="ds_sales")
    schema = await reader.discover(sales, [])
    assert set(schema.tables) == {"ds_sales.orders", "ds_sales.Mixed Table"}


async def test_discover_unreachable_datasource_is_unavailable(endpoint: Endpoint) -> None:
    missing = endpoint_with(endpoint, database_name="fetcher_ds_no_such_db")
    with pytest.raises(DatasourceError) as caught:
        await PostgresReader().discover(missing, [])
    assert caught.value.stage == "connect"


async def test_discover_timeout_is_a_discovery_failure(endpoint: Endpoint) -> None:
    await assert_discovery_times_out(PostgresReader(discover_timeout=1e-6), endpoint)


# --- extraction: values ----------------------------------------------------------------------

EXPECTED: list[dict[str, Any]] = [
    {
        "id": 1, "n": 10, "amount": "12.50", "label": "alpha", "code": "A-1", "active": True,
        "day": "2024-01-15", "at_tz": "2024-01-15T10:30:00Z", "at_local": "2024-01-15T10:30:00Z",
        "ref": "00000000-0000-0000-0000-000000000001", "blob": "AP8=",
        "doc": {"k": [1, 2.5, "x"], "n": None}, "ratio": 0.5, "tags": ["a", "b"],
        "Mixed Case": "Upper", "order": 3,
    },
    {
        "id": 2, "n": 20, "amount": "-0.01", "label": "beta", "code": "B_2", "active": False,
        "day": "2024-01-31", "at_tz": "2024-01-31T23:59:59.999000Z",
        "at_local": "2024-01-31T23:59:59.500000Z", "ref": "00000000-0000-0000-0000-000000000002",
        "blob": "", "doc": [], "ratio": "NaN", "tags": [], "Mixed Case": "lower", "order": 1,
    },
    {
        "id": 3, "n": None, "amount": None, "label": None, "code": None, "active": None,
        "day": None, "at_tz": None, "at_local": None, "ref": None, "blob": None, "doc": None,
        "ratio": None, "tags": None, "Mixed Case": None, "order": None,
    },
    {
        "id": 4, "n": 40, "amount": "99999999999999.99", "label": HOSTILE, "code": "ünï😀",
        "active": True, "day": "2024-02-01", "at_tz": "2024-01-31T19:00:00Z",
        "at_local": "2024-02-01T00:00:00Z", "ref": "00000000-0000-0000-0000-000000000004",
        "blob": "QQ==", "doc": {"quote": 'a"b <&>'}, "ratio": 1e300, "tags": ["x y", '"q"'],
        "Mixed Case": "x", "order": 2,
    },
    {
        "id": 5, "n": 50, "amount": "0.00", "label": "a%b_c", "code": "100%", "active": False,
        "day": "2023-12-31", "at_tz": "2023-12-31T12:00:00Z", "at_local": "2023-12-31T12:00:00Z",
        "ref": "00000000-0000-0000-0000-000000000005", "blob": "", "doc": "s",
        "ratio": "-Infinity", "tags": None, "Mixed Case": None, "order": 5,
    },
]  # fmt: skip


async def test_wildcard_extracts_every_column_with_exact_json_values_in_row_order(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    assert await read_table(reader, endpoint, "ds_types") == EXPECTED


async def test_row_objects_have_sorted_keys(reader: PostgresReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_types"]
    read = TableRead(result_key="ds_types", table=table, columns=table.columns)
    [chunk] = [c async for c in extract(reader, endpoint, [read])]
    first = json.loads(b"[" + chunk.data + b"]", object_pairs_hook=lambda pairs: pairs)[0]
    keys = [key for key, _ in first]
    assert keys == sorted(keys)
    assert chunk.data.startswith(b'{"Mixed Case":"Upper","active":true,"amount":"12.50",')
    assert b'"doc":{"k": [1, 2.5, "x"], "n": null}' in chunk.data  # jsonb text, not re-encoded


async def test_projection_returns_only_the_requested_columns(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    rows = await read_table(reader, endpoint, "ds_types", ["order", "Mixed Case", "id"])
    assert rows == [
        {"id": e["id"], "order": e["order"], "Mixed Case": e["Mixed Case"]} for e in EXPECTED
    ]


async def test_other_types_come_out_as_documented(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    [row] = await read_table(reader, endpoint, "ds_misc")
    assert row == {
        "iv": "P1Y2M3DT4H5M6.5S",
        "ip": "10.0.0.1/8",
        "t": "13:14:15.500000",
        "r": "[1,5)",
        "mood": "happy",
        "f4": 1.1,
        "nums": ["1.50", "NaN"],
        "stamps": ["2024-01-01T10:00:00Z"],
        "big": "123456789012345678901234567890",
        "tiny": "0.00000001",
    }


async def test_enum_and_other_types_filter_by_their_text(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    assert len(await read_table(reader, endpoint, "ds_misc", ["r"], {"mood": {"eq": ("happy",)}}))
    assert not await read_table(reader, endpoint, "ds_misc", ["r"], {"mood": {"eq": ("sad",)}})
    found = await read_table(reader, endpoint, "ds_misc", ["mood"], {"ip": {"like": ("10.%",)}})
    assert found == [{"mood": "happy"}]


async def test_values_python_cannot_hold_fail_the_query(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    with pytest.raises(DatasourceQueryFailed) as caught:
        await read_table(reader, endpoint, "ds_bc")
    assert "date/time value is outside" in str(caught.value)


async def test_non_public_and_mixed_case_tables_are_read(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    assert await read_table(reader, endpoint, "ds_sales.orders") == [{"id": 7, "total": "70.00"}]
    assert await read_table(reader, endpoint, "ds_sales.Mixed Table") == [{"Id": 1}]


async def test_large_table_streams_in_chunks_in_order(endpoint: Endpoint) -> None:
    reader = PostgresReader()  # rows encoded in Python: chunks of chunk_rows
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_big"]
    read = TableRead(result_key="ds_big", table=table, columns=table.columns)
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert [c.rows for c in chunks] == [10_000, 10_000, 5_000]
    assert {c.result_key for c in chunks} == {"ds_big"}
    rows = [row for chunk in chunks for row in parse(chunk)]
    assert [r["id"] for r in rows] == list(range(1, 25_001))
    assert rows[-1] == {"id": 25_000, "label": "row 25000"}
    assert gc.isenabled()


async def test_a_chunks_records_are_freed_before_the_gc_is_back(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records the GC would find alive when it is re-enabled cost its next collection a
    traversal of every one of them, for every chunk."""
    paused = reader_module.paused_gc
    alive_at_resume: list[int] = []

    @contextlib.contextmanager
    def watched() -> Iterator[None]:
        with paused():
            yield
            alive_at_resume.append(gc.get_count()[0])  # GC-tracked objects made and not freed

    monkeypatch.setattr(reader_module, "paused_gc", watched)
    reader = PostgresReader()
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_big"]
    read = TableRead(result_key="ds_big", table=table, columns=table.columns)
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert [c.rows for c in chunks] == [10_000, 10_000, 5_000]
    assert len(alive_at_resume) == 3
    assert max(alive_at_resume) < 2_000


async def test_chunk_size_is_configurable(endpoint: Endpoint) -> None:
    reader = PostgresReader(chunk_rows=1_000)
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_big"]
    read = TableRead(result_key="ds_big", table=table, columns=table.columns[:1])
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert len(chunks) == 25
    assert all(c.rows == 1_000 for c in chunks)


async def test_empty_table_yields_no_chunks(reader: PostgresReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_empty"]
    read = TableRead(result_key="ds_empty", table=table, columns=table.columns)
    assert [c async for c in extract(reader, endpoint, [read])] == []


async def test_several_tables_are_read_in_order_under_their_result_keys(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, ["public", "ds_sales"])
    reads = [
        TableRead(result_key=key, table=schema.tables[key], columns=schema.tables[key].columns)
        for key in ("ds_sales.orders", "ds_empty", "ds_types")
    ]
    chunks = [c async for c in extract(reader, endpoint, reads)]
    assert [(c.result_key, c.rows) for c in chunks] == [("ds_sales.orders", 1), ("ds_types", 5)]


async def _open_sessions() -> int:
    conn = await pg_admin(DATABASE)
    try:
        return await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
            "AND application_name = 'fetcher' AND pid <> pg_backend_pid()",
            DATABASE,
        )
    finally:
        await conn.close()


async def _sessions_settle(expected: int) -> int:
    return await sessions_settle(_open_sessions, expected)


async def test_stopping_early_closes_the_connection(endpoint: Endpoint) -> None:
    reader = PostgresReader()  # the first chunk: 10,000 rows
    schema = await reader.discover(endpoint, [])
    read = table_read(schema, "ds_big")
    await assert_stopping_early_closes_the_connection(reader, endpoint, read, _open_sessions)


async def test_query_failure_is_datasource_query_failed(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    gone = Table(schema="public", name="ds_no_such_table", columns=(Column("id", "bigint"),))
    read = TableRead(result_key="ds_no_such_table", table=gone, columns=gone.columns)
    with pytest.raises(DatasourceQueryFailed) as caught:
        [c async for c in extract(reader, endpoint, [read])]
    assert str(caught.value) == "failed to query datasource"
    assert isinstance(caught.value.__cause__, asyncpg.UndefinedTableError)
    assert await _sessions_settle(0) == 0


# --- extraction: filters ---------------------------------------------------------------------

FILTER_CASES: list[tuple[str, dict[str, dict[str, tuple[Any, ...]]], list[int]]] = [
    ("eq int", {"n": {"eq": (10,)}}, [1]),
    ("eq int from string", {"n": {"eq": ("20",)}}, [2]),
    ("eq several is IN", {"n": {"eq": (10, 40)}}, [1, 4]),
    ("eq null", {"n": {"eq": (None,)}}, [3]),
    ("eq null or value", {"n": {"eq": (None, 10)}}, [1, 3]),
    ("ne excludes nulls", {"n": {"ne": (10,)}}, [2, 4, 5]),
    ("ne null", {"n": {"ne": (None,)}}, [1, 2, 4, 5]),
    ("ne several", {"n": {"ne": (10, 20)}}, [4, 5]),
    ("gt int", {"n": {"gt": (20,)}}, [4, 5]),
    ("gte int", {"n": {"gte": (20,)}}, [2, 4, 5]),
    ("lt int", {"n": {"lt": (20,)}}, [1]),
    ("lte int", {"n": {"lte": (20.0,)}}, [1, 2]),
    ("bigint beyond int32", {"id": {"lt": (2**40,)}}, [1, 2, 3, 4, 5]),
    ("gt numeric", {"amount": {"gt": ("12.49",)}}, [1, 4]),
    ("lte numeric float", {"amount": {"lte": (0,)}}, [2, 5]),
    ("between numeric", {"amount": {"between": ("-0.01", 12.5)}}, [1, 2, 5]),
    ("eq numeric exact", {"amount": {"eq": ("99999999999999.99",)}}, [4]),
    ("gt float", {"ratio": {"gt": (0.25,)}}, [1, 2, 4]),  # NaN sorts above all numbers in PG
    ("eq bool", {"active": {"eq": (True,)}}, [1, 4]),
    ("eq bool string", {"active": {"eq": ("false",)}}, [2, 5]),
    ("ne bool", {"active": {"ne": (True,)}}, [2, 5]),
    ("eq date", {"day": {"eq": ("2024-01-31",)}}, [2]),
    ("lt date", {"day": {"lt": ("2024-01-15",)}}, [5]),
    ("between date", {"day": {"between": ("2024-01-15", "2024-01-31")}}, [1, 2]),
    ("gte timestamptz", {"at_tz": {"gte": ("2024-01-31T19:00:00Z",)}}, [2, 4]),
    ("gt timestamptz offset", {"at_tz": {"gt": ("2024-02-01T00:00:00+05:00",)}}, [2]),
    ("between timestamptz end of day", {"at_tz": {"between": ("2024-01-01", "2024-01-31")}},
     [1, 2, 4]),
    ("between timestamptz exact", {"at_tz": {"between": ("2024-01-01", "2024-01-31T12:00:00Z")}},
     [1]),
    ("between timestamp end of day", {"at_local": {"between": ("2024-01-01", "2024-01-31")}},
     [1, 2]),
    ("lt timestamp", {"at_local": {"lt": ("2024-01-15T10:30:00",)}}, [5]),
    ("eq uuid", {"ref": {"eq": ("00000000-0000-0000-0000-000000000004",)}}, [4]),
    ("in uuid", {"ref": {"in": ("00000000-0000-0000-0000-000000000001",
                                "00000000-0000-0000-0000-000000000002")}}, [1, 2]),
    ("in text", {"code": {"in": ("A-1", "B_2")}}, [1, 2]),
    ("in with null", {"code": {"in": ("A-1", None)}}, [1, 3]),
    ("nin text", {"code": {"nin": ("A-1", "B_2")}}, [4, 5]),
    ("nin with null", {"code": {"nin": ("A-1", None)}}, [2, 4, 5]),
    ("in int", {"n": {"in": (20, 50)}}, [2, 5]),
    ("nin int", {"n": {"nin": (20, 50)}}, [1, 4]),
    ("like prefix", {"label": {"like": ("a%",)}}, [1, 5]),
    ("like is case-sensitive", {"label": {"like": ("A%",)}}, []),
    ("like single char", {"code": {"like": ("B_2",)}}, [2]),
    ("like escaped wildcards", {"label": {"like": ("a\\%b\\_c",)}}, [5]),
    ("like escaped percent", {"code": {"like": ("100\\%",)}}, [5]),
    ("like hostile", {"label": {"like": ("%; DROP TABLE%",)}}, [4]),
    ("like on integer", {"n": {"like": ("1%",)}}, [1]),
    ("like on uuid", {"ref": {"like": ("%5",)}}, [5]),
    ("eq jsonb as text", {"doc": {"eq": ("[]",)}}, [2]),
    ("eq reserved word column", {"order": {"eq": (2,)}}, [4]),
    ("eq mixed case column", {"Mixed Case": {"eq": ("Upper",)}}, [1]),
    ("operators on a field AND-ed", {"n": {"gte": (10,), "lte": (40,), "ne": (20,)}}, [1, 4]),
    ("fields AND-ed", {"n": {"gt": (10,)}, "active": {"eq": (False,)}}, [2, 5]),
    ("hostile value matches literally", {"label": {"eq": (HOSTILE,)}}, [4]),
    ("hostile value matches nothing", {"label": {"eq": ("'; SELECT pg_sleep(5); --",)}}, []),
    ("quote and backslash", {"code": {"eq": ("'\\\"",)}}, []),
    ("unicode", {"code": {"eq": ("ünï😀",)}}, [4]),
    ("empty arrays ignored", {"n": {"eq": ()}}, [1, 2, 3, 4, 5]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"),
    [pytest.param(f, e, id=name) for name, f, e in FILTER_CASES],
)
async def test_filters(
    reader: PostgresReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    assert await ids(reader, endpoint, filters) == expected


async def test_hostile_values_leave_the_table_intact(
    reader: PostgresReader, endpoint: Endpoint
) -> None:
    await ids(reader, endpoint, {"label": {"eq": ("x'); DROP TABLE ds_types; --",)}})
    assert len(await ids(reader, endpoint, {})) == 5


@pytest.mark.parametrize(
    ("filters", "fragment"),
    [
        ({"n": {"eq": ("abc",)}}, "operator 'eq' expects an integer for column type 'integer'"),
        ({"n": {"gt": (1.5,)}}, "operator 'gt' expects an integer"),
        ({"ref": {"in": ("not-a-uuid",)}}, "operator 'in' expects a UUID"),
        ({"day": {"lt": ("31/01/2024",)}}, "operator 'lt' expects a date (YYYY-MM-DD)"),
        ({"at_tz": {"between": ("2024-01-01", "soon")}}, "operator 'between' expects an ISO 8601"),
        ({"active": {"eq": ("maybe",)}}, "operator 'eq' expects a boolean"),
        ({"amount": {"gte": ("1,50",)}}, "operator 'gte' expects a decimal number"),
        ({"n": {"eq": (2**31,)}}, "operator 'eq' expects an integer"),
        ({"n": {"gt": (None,)}}, "operator 'gt' does not accept null"),
    ],
)
async def test_unconvertible_filter_values_are_invalid_requests(
    reader: PostgresReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    fragment: str,
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await ids(reader, endpoint, filters)
    assert caught.value.code == "FET-0401"
    field = next(iter(filters))
    assert caught.value.message.startswith(
        f"filter on 'ds_types.{field}' of database '{DATABASE}': "
    )
    assert fragment in caught.value.message


async def test_invalid_filters_fail_before_connecting(endpoint: Endpoint) -> None:
    table = Table(schema="public", name="ds_types", columns=(Column("n", "integer"),))
    read = TableRead(
        result_key="ds_types", table=table, columns=table.columns, filters={"n": {"eq": ("x",)}}
    )
    nowhere = endpoint_with(endpoint, port=1)
    with pytest.raises(InvalidRequest):
        PostgresReader().prepare(nowhere, [read])


# --- connection test and TLS -----------------------------------------------------------------


async def test_connection_test_succeeds(reader: PostgresReader, endpoint: Endpoint) -> None:
    await reader.test(endpoint, timeout=5)


class FakeServer:
    """Speaks just enough PostgreSQL protocol to ask for a cleartext password and refuse it,
    or (``silent``) to accept the connection and never answer."""

    def __init__(self, *, silent: bool = False) -> None:
        self.silent = silent
        self.passwords: list[str] = []

    async def __aenter__(self) -> FakeServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            length = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(length - 4)
            if self.silent:
                await reader.read()
                return
            writer.write(b"R" + (8).to_bytes(4, "big") + (3).to_bytes(4, "big"))
            await writer.drain()
            await reader.readexactly(1)
            length = int.from_bytes(await reader.readexactly(4), "big")
            self.passwords.append((await reader.readexactly(length - 4)).rstrip(b"\0").decode())
            fields = (
                b'SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user "fetcher"\0\0'
            )
            writer.write(b"E" + (len(fields) + 4).to_bytes(4, "big") + fields)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_wrong_password_fails_without_showing_it(endpoint: Endpoint) -> None:
    password = "s3cr3t @:/?#&=+% ünï"  # characters a URL would mangle
    async with FakeServer() as server:
        target = endpoint_with(endpoint, port=server.port, user_name="fetcher", password=password)
        with pytest.raises(DatasourceUnavailable) as caught:
            await PostgresReader().test(target, timeout=5)
    assert server.passwords == [password]  # passed as a parameter, byte for byte
    assert str(caught.value) == "failed to connect to datasource"
    assert password not in repr(caught.value)
    assert caught.value.stage == "connect"
    assert isinstance(caught.value.__cause__, asyncpg.InvalidPasswordError)
    assert password not in repr(target)


async def test_connection_test_times_out(endpoint: Endpoint) -> None:
    async with FakeServer(silent=True) as server:
        target = endpoint_with(endpoint, port=server.port)
        started = asyncio.get_running_loop().time()
        with pytest.raises(DatasourceUnavailable):
            await PostgresReader().test(target, timeout=0.5)
        assert asyncio.get_running_loop().time() - started < 3


@pytest.mark.parametrize(
    "change",
    [{"port": 1}, {"user_name": "fetcher_no_such_role"}, {"database_name": "fetcher_no_such_db"}],
)
async def test_connection_test_failures_are_unavailable(
    endpoint: Endpoint, change: dict[str, Any]
) -> None:
    with pytest.raises(DatasourceUnavailable) as caught:
        await PostgresReader().test(endpoint_with(endpoint, **change), timeout=5)
    assert str(caught.value) == "failed to connect to datasource"
    assert caught.value.__cause__ is not None


async def test_prefer_falls_back_to_plain_and_require_refuses_it(endpoint: Endpoint) -> None:
    # The local server has TLS off: "prefer" connects without it, "require" must not.
    await PostgresReader().test(endpoint_with(endpoint, ssl_mode="prefer"), 5)
    with pytest.raises(DatasourceUnavailable):
        await PostgresReader().test(endpoint_with(endpoint, ssl_mode="require"), 5)


def _tls_endpoint(endpoint: Endpoint, mode: str, **extra: Any) -> Endpoint:
    return endpoint_with(endpoint, ssl_mode=mode, **extra)


@pytest.mark.parametrize("mode", ["", "disable"])
def test_ssl_off_modes(endpoint: Endpoint, mode: str) -> None:
    assert ssl_argument(_tls_endpoint(endpoint, mode)) is False


@pytest.mark.parametrize("mode", ["allow", "prefer"])
def test_ssl_opportunistic_modes(endpoint: Endpoint, mode: str) -> None:
    assert ssl_argument(_tls_endpoint(endpoint, mode)) == "prefer"


def test_ssl_require_encrypts_without_verifying(endpoint: Endpoint) -> None:
    context = ssl_argument(_tls_endpoint(endpoint, "require"))
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_NONE
    assert not context.check_hostname


def test_ssl_verify_modes_trust_the_given_ca(endpoint: Endpoint) -> None:
    ca, _ = self_signed_certificate()
    verify_ca = ssl_argument(_tls_endpoint(endpoint, "verify-ca", ssl_ca=ca))
    assert isinstance(verify_ca, ssl.SSLContext)
    assert verify_ca.verify_mode == ssl.CERT_REQUIRED
    assert not verify_ca.check_hostname
    assert [c["subject"] for c in verify_ca.get_ca_certs()] == [
        ((("commonName", "fetcher-test"),),)
    ]
    verify_full = ssl_argument(_tls_endpoint(endpoint, "verify-full", ssl_ca=ca))
    assert isinstance(verify_full, ssl.SSLContext)
    assert verify_full.check_hostname
    assert verify_full.verify_mode == ssl.CERT_REQUIRED


def test_ssl_client_certificate_is_loaded_and_no_file_is_left(endpoint: Endpoint) -> None:
    cert, key = self_signed_certificate()
    before = set(Path(tempfile.gettempdir()).glob("fetcher-tls-*"))
    context = ssl_argument(_tls_endpoint(endpoint, "require", ssl_cert=cert, ssl_key=key))
    assert isinstance(context, ssl.SSLContext)
    assert set(Path(tempfile.gettempdir()).glob("fetcher-tls-*")) == before


def test_ssl_unknown_mode_is_rejected(endpoint: Endpoint) -> None:
    with pytest.raises(InvalidSslMode):
        ssl_argument(_tls_endpoint(endpoint, "VERIFY-FULL"))
