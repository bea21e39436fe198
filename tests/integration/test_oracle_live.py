"""OracleReader against a real Oracle database: the PostgreSQL reader's scenarios (connect,
discover, extract, filter, result format).

The server comes from ``FETCHER_TEST_ORACLE_URL``
(``oracle://user:password@host:1521/SERVICE_NAME``), else from a container (Oracle Database Free)
when a Docker engine is reachable; otherwise the tests are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from adapters.datasources.oracle.connection import SERVICE_NAME_REQUIRED
from adapters.datasources.oracle.reader import OracleReader
from application.errors import DatasourceQueryFailed, DatasourceUnavailable
from domain.connection import Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead
from tests.integration.live_servers import oracle_execute, oracle_server
from tests.integration.reader_helpers import (
    endpoint_with,
    extract,
    extract_rows,
    parse,
    table_read,
)

HOSTILE = "O'Brien; DROP TABLE ds_types; --"

_DROP = """BEGIN
  FOR t IN (SELECT table_name FROM user_tables
            WHERE table_name IN ('DS_TYPES', 'DS_BIG', 'DS_EMPTY', 'DS_TEXT', 'ds_lower')) LOOP
    EXECUTE IMMEDIATE 'DROP TABLE "' || t.table_name || '" PURGE';
  END LOOP;
  FOR v IN (SELECT view_name FROM user_views WHERE view_name = 'DS_VIEW') LOOP
    EXECUTE IMMEDIATE 'DROP VIEW DS_VIEW';
  END LOOP;
END;"""
SETUP = [
    _DROP,
    """CREATE TABLE DS_TYPES (
        ID NUMBER(10) PRIMARY KEY, N NUMBER(10), AMOUNT NUMBER(18,2), LABEL VARCHAR2(100),
        CODE VARCHAR2(20), DAY DATE, AT_TZ TIMESTAMP WITH TIME ZONE, AT_LOCAL TIMESTAMP,
        BLOBV RAW(10), RATIO BINARY_DOUBLE, NOTE CLOB, "Mixed Case" VARCHAR2(20))""",
    """INSERT INTO DS_TYPES VALUES (1, 10, 12.50, 'alpha', 'A-1', DATE '2024-01-15',
        TIMESTAMP '2024-01-15 10:30:00 +00:00', TIMESTAMP '2024-01-15 10:30:00', HEXTORAW('00FF'),
        0.5, 'note one', 'Upper')""",
    """INSERT INTO DS_TYPES VALUES (2, 20, -0.01, 'beta', 'B_2',
        TO_DATE('2024-01-31 23:59:59', 'YYYY-MM-DD HH24:MI:SS'),
        TIMESTAMP '2024-01-31 23:59:59.999 +00:00', TIMESTAMP '2024-01-31 23:59:59.5', NULL,
        BINARY_DOUBLE_NAN, 'note two', 'lower')""",
    """INSERT INTO DS_TYPES (ID) VALUES (3)""",
    """INSERT INTO DS_TYPES VALUES (4, 40, 99999999999999.99, 'O''Brien; DROP TABLE ds_types; --',
        'ünï😀', DATE '2024-02-01', TIMESTAMP '2024-02-01 00:00:00 +05:00',
        TIMESTAMP '2024-02-01 00:00:00', HEXTORAW('41'), 1e300, 'x', 'x')""",
    """INSERT INTO DS_TYPES VALUES (5, 50, 0, 'a%b_c', '100%', DATE '2023-12-31',
        TIMESTAMP '2023-12-31 12:00:00 +00:00', TIMESTAMP '2023-12-31 12:00:00', NULL,
        -BINARY_DOUBLE_INFINITY, NULL, NULL)""",
    """CREATE TABLE DS_BIG AS SELECT CAST(LEVEL AS NUMBER(10)) AS ID, 'row ' || LEVEL AS LABEL
        FROM DUAL CONNECT BY LEVEL <= 25000""",
    "CREATE TABLE DS_EMPTY (ID NUMBER(19))",
    "CREATE TABLE DS_TEXT (ID NUMBER(10), V VARCHAR2(20), C CHAR(4), NV NVARCHAR2(20))",
    """INSERT INTO DS_TEXT
        SELECT 1, 'a', 'a', N'a' FROM DUAL UNION ALL SELECT 2, 'a ', 'a ', N'a ' FROM DUAL
        UNION ALL SELECT 3, 'A', 'A', N'Á' FROM DUAL
        UNION ALL SELECT 4, 'a' || CHR(9), 'a' || CHR(9), N'a' || NCHR(9) FROM DUAL
        UNION ALL SELECT 5, 'b', 'b', N'b' FROM DUAL UNION ALL SELECT 6, NULL, NULL, NULL FROM DUAL
    """,
    'CREATE TABLE "ds_lower" ("id" NUMBER(10))',
    'INSERT INTO "ds_lower" VALUES (1)',
    "CREATE VIEW DS_VIEW AS SELECT ID FROM DS_TYPES",
]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    with oracle_server() as target:
        asyncio.run(oracle_execute(target, SETUP))
        yield target


@pytest.fixture
def reader() -> OracleReader:
    return OracleReader()


async def read_table(
    reader: OracleReader,
    endpoint: Endpoint,
    name: str,
    fields: Sequence[str] | None = None,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None,
) -> list[dict[str, Any]]:
    schema = await reader.discover(endpoint, [])
    return await extract_rows(reader, endpoint, table_read(schema, name, fields, filters))


async def ids(
    reader: OracleReader, endpoint: Endpoint, filters: Mapping[str, Mapping[str, tuple[Any, ...]]]
) -> list[int]:
    rows = await read_table(reader, endpoint, "DS_TYPES", ["ID"], filters)
    return sorted(row["ID"] for row in rows)


# --- connect ----------------------------------------------------------------------------------


async def test_connection_test_succeeds(reader: OracleReader, endpoint: Endpoint) -> None:
    await reader.test(endpoint, timeout=10)


async def test_wrong_password_is_unavailable_without_showing_it(endpoint: Endpoint) -> None:
    password = "wrong p@ss:w/rd ünï"
    with pytest.raises(DatasourceUnavailable) as caught:
        await OracleReader().test(endpoint_with(endpoint, password=password), timeout=10)
    assert str(caught.value) == "failed to connect to datasource"
    assert password not in repr(caught.value)


async def test_service_name_is_required(endpoint: Endpoint) -> None:
    with pytest.raises(InvalidRequest, match=SERVICE_NAME_REQUIRED):
        await OracleReader().test(endpoint_with(endpoint, options={}), timeout=10)


# --- discover ---------------------------------------------------------------------------------


async def test_discover_lists_own_tables_upper_cased_with_typed_columns(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["DS_TYPES"]
    assert table.name == "DS_TYPES"
    assert [(c.name, c.data_type) for c in table.columns] == [
        ("ID", "number(10,0)"), ("N", "number(10,0)"), ("AMOUNT", "number(18,2)"),
        ("LABEL", "varchar2"), ("CODE", "varchar2"), ("DAY", "date"),
        ("AT_TZ", "timestamp(6) with time zone"), ("AT_LOCAL", "timestamp(6)"),
        ("BLOBV", "raw"), ("RATIO", "binary_double"), ("NOTE", "clob"), ("MIXED CASE", "varchar2"),
    ]  # fmt: skip
    assert "DS_VIEW" not in schema.tables
    assert "DS_LOWER" in schema.tables
    assert not [n for n in schema.tables if "$" in n]


async def test_discover_scope_of_system_owners_finds_nothing_of_theirs(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, ["sys", "system"])
    assert not [n for n in schema.tables if n.startswith(("SYS.", "SYSTEM."))]
    assert "DS_TYPES" in schema.tables  # the user's own tables are always there, unqualified


# --- extract and result format ----------------------------------------------------------------

EXPECTED: list[dict[str, Any]] = [
    {
        "ID": 1, "N": 10, "AMOUNT": "12.5", "LABEL": "alpha", "CODE": "A-1",
        "DAY": "2024-01-15T00:00:00Z", "AT_TZ": "2024-01-15T10:30:00Z",
        "AT_LOCAL": "2024-01-15T10:30:00Z", "BLOBV": "AP8=", "RATIO": 0.5, "NOTE": "note one",
        "MIXED CASE": "Upper",
    },
    {
        "ID": 2, "N": 20, "AMOUNT": "-0.01", "LABEL": "beta", "CODE": "B_2",
        "DAY": "2024-01-31T23:59:59Z", "AT_TZ": "2024-01-31T23:59:59.999000Z",
        "AT_LOCAL": "2024-01-31T23:59:59.500000Z", "BLOBV": None, "RATIO": "NaN",
        "NOTE": "note two", "MIXED CASE": "lower",
    },
    {
        "ID": 3, "N": None, "AMOUNT": None, "LABEL": None, "CODE": None, "DAY": None,
        "AT_TZ": None, "AT_LOCAL": None, "BLOBV": None, "RATIO": None, "NOTE": None,
        "MIXED CASE": None,
    },
    {
        "ID": 4, "N": 40, "AMOUNT": "99999999999999.99", "LABEL": HOSTILE, "CODE": "ünï😀",
        "DAY": "2024-02-01T00:00:00Z", "AT_TZ": "2024-01-31T19:00:00Z",
        "AT_LOCAL": "2024-02-01T00:00:00Z", "BLOBV": "QQ==", "RATIO": 1e300, "NOTE": "x",
        "MIXED CASE": "x",
    },
    {
        "ID": 5, "N": 50, "AMOUNT": "0", "LABEL": "a%b_c", "CODE": "100%",
        "DAY": "2023-12-31T00:00:00Z", "AT_TZ": "2023-12-31T12:00:00Z",
        "AT_LOCAL": "2023-12-31T12:00:00Z", "BLOBV": None, "RATIO": "-Infinity", "NOTE": None,
        "MIXED CASE": None,
    },
]  # fmt: skip


async def test_wildcard_extracts_every_column_in_the_common_format(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    rows = await read_table(reader, endpoint, "DS_TYPES")
    assert sorted(rows, key=lambda r: r["ID"]) == EXPECTED


async def test_projection_uses_upper_cased_keys_and_physical_names(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    rows = await read_table(reader, endpoint, "DS_TYPES", ["MIXED CASE", "ID"])
    assert sorted(rows, key=lambda r: r["ID"]) == [
        {"ID": e["ID"], "MIXED CASE": e["MIXED CASE"]} for e in EXPECTED
    ]
    assert await read_table(reader, endpoint, "DS_LOWER") == [{"ID": 1}]


async def test_large_table_streams_in_chunks(reader: OracleReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["DS_BIG"]
    read = TableRead("DS_BIG", table, table.columns)
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert [c.rows for c in chunks] == [10_000, 10_000, 5_000]
    rows = [row for chunk in chunks for row in parse(chunk)]
    assert sorted(r["ID"] for r in rows) == list(range(1, 25_001))


async def test_empty_table_yields_nothing(reader: OracleReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["DS_EMPTY"]
    read = TableRead("DS_EMPTY", table, table.columns)
    assert [c async for c in extract(reader, endpoint, [read])] == []


async def test_query_failure_is_datasource_query_failed(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    gone = Table(schema=None, name="DS_NO_SUCH_TABLE", columns=(Column("ID", "number"),))
    with pytest.raises(DatasourceQueryFailed):
        [c async for c in extract(reader, endpoint, [TableRead("GONE", gone, gone.columns)])]


# --- filter -----------------------------------------------------------------------------------

FILTER_CASES: list[tuple[str, dict[str, dict[str, tuple[Any, ...]]], list[int]]] = [
    ("eq", {"N": {"eq": (10,)}}, [1]),
    ("eq from string", {"N": {"eq": ("20",)}}, [2]),
    ("eq several", {"N": {"eq": (10, 40)}}, [1, 4]),
    ("eq null", {"N": {"eq": (None,)}}, [3]),
    ("ne excludes nulls", {"N": {"ne": (10,)}}, [2, 4, 5]),
    ("gt", {"N": {"gt": (20,)}}, [4, 5]),
    ("between numeric", {"AMOUNT": {"between": ("-0.01", 12.5)}}, [1, 2, 5]),
    ("eq date at midnight", {"DAY": {"eq": ("2024-01-15",)}}, [1]),
    ("between dates end of day", {"DAY": {"between": ("2024-01-15", "2024-01-31")}}, [1, 2]),
    ("gte timestamp with time zone", {"AT_TZ": {"gte": ("2024-01-31T19:00:00Z",)}}, [2, 4]),
    ("gt offset", {"AT_TZ": {"gt": ("2024-02-01T00:00:00+05:00",)}}, [2]),
    ("lt timestamp", {"AT_LOCAL": {"lt": ("2024-01-15T10:30:00",)}}, [5]),
    ("in text", {"CODE": {"in": ("A-1", "B_2")}}, [1, 2]),
    ("nin text", {"CODE": {"nin": ("A-1", "B_2")}}, [4, 5]),
    ("like prefix", {"LABEL": {"like": ("a%",)}}, [1, 5]),
    ("like is case-sensitive", {"LABEL": {"like": ("A%",)}}, []),
    ("like escaped wildcards", {"LABEL": {"like": ("a\\%b\\_c",)}}, [5]),
    ("like plain escape", {"LABEL": {"like": ("\\alpha",)}}, [1]),
    ("like on clob", {"NOTE": {"like": ("note%",)}}, [1, 2]),
    ("eq on clob", {"NOTE": {"eq": ("x",)}}, [4]),
    ("like on number", {"N": {"like": ("1%",)}}, [1]),
    ("eq mixed case column", {"MIXED CASE": {"eq": ("Upper",)}}, [1]),
    ("hostile value matches literally", {"LABEL": {"eq": (HOSTILE,)}}, [4]),
    ("operators AND-ed", {"N": {"gte": (10,), "lte": (40,), "ne": (20,)}}, [1, 4]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"), [pytest.param(f, e, id=name) for name, f, e in FILTER_CASES]
)
async def test_filters(
    reader: OracleReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    assert await ids(reader, endpoint, filters) == expected


TEXT_CASES: list[tuple[str, dict[str, dict[str, tuple[Any, ...]]], list[int]]] = [
    ("eq is case-sensitive and not padded", {"V": {"eq": ("a",)}}, [1]),
    ("eq keeps trailing spaces", {"V": {"eq": ("a ",)}}, [2]),
    ("eq is accent-sensitive", {"NV": {"eq": ("A",)}}, []),
    ("in", {"NV": {"in": ("Á", "b")}}, [3, 5]),
    ("ne", {"V": {"ne": ("a",)}}, [2, 3, 4, 5]),
    ("gt by code point", {"V": {"gt": ("a",)}}, [2, 4, 5]),
    ("lt by code point", {"V": {"lt": ("a",)}}, [3]),
    ("between", {"NV": {"between": ("a", "a ")}}, [1, 2, 4]),
    ("like is not padded", {"V": {"like": ("a",)}}, [1]),
    ("like one more character", {"NV": {"like": ("a_",)}}, [2, 4]),
    ("char compares as stored", {"C": {"eq": ("a   ",)}}, [1, 2]),
    ("char without its padding", {"C": {"eq": ("a",)}}, []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"), [pytest.param(f, e, id=name) for name, f, e in TEXT_CASES]
)
async def test_text_compares_exactly(
    reader: OracleReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    rows = await read_table(reader, endpoint, "DS_TEXT", ["ID"], filters)
    assert sorted(row["ID"] for row in rows) == expected


async def test_an_empty_string_is_refused_as_oracle_cannot_hold_one(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    with pytest.raises(InvalidRequest, match="Oracle stores an empty string as NULL"):
        await read_table(reader, endpoint, "DS_TEXT", ["ID"], {"V": {"ne": ("",)}})


async def test_unconvertible_values_are_invalid_requests(
    reader: OracleReader, endpoint: Endpoint
) -> None:
    with pytest.raises(InvalidRequest, match="operator 'lt' expects an ISO 8601"):
        await ids(reader, endpoint, {"DAY": {"lt": ("31/01/2024",)}})
