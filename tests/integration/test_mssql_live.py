"""SqlServerReader against a real SQL Server: the PostgreSQL reader's scenarios (connect, discover,
extract, filter, result format).

The server comes from ``FETCHER_TEST_MSSQL_URL``
(``mssql://user:password@host:1433/database?driver=FreeTDS&ssl=true``), else from a container when
a Docker engine is reachable; otherwise the tests are skipped. The last tests need only the FreeTDS
ODBC driver: a fake server checks what the driver sends.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from adapters.datasources.mssql.connection import DEFAULT_DRIVER
from adapters.datasources.mssql.reader import SqlServerReader
from application.errors import DatasourceQueryFailed, DatasourceUnavailable
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead
from tests.integration.conftest import unique_name
from tests.integration.live_servers import mssql_execute, sql_server
from tests.integration.reader_helpers import (
    endpoint_with,
    extract,
    extract_rows,
    parse,
    table_read,
)

DATABASE = unique_name("fetcher_ds_test")
HOSTILE = "O'Brien; DROP TABLE ds_types; --"

SETUP = [
    "DROP TABLE IF EXISTS dbo.ds_types, dbo.ds_big, dbo.ds_empty, dbo.ds_text, ds_sales.orders",
    "DROP VIEW IF EXISTS dbo.ds_view",
    "IF SCHEMA_ID('ds_sales') IS NOT NULL DROP SCHEMA ds_sales",
    "CREATE SCHEMA ds_sales",
    """CREATE TABLE dbo.ds_types (
        id bigint PRIMARY KEY, n int, amount decimal(18,2), label nvarchar(100),
        code varchar(20), active bit, day date, at_tz datetimeoffset, at_local datetime2,
        ref uniqueidentifier, blob varbinary(10), ratio float, r real, tiny tinyint,
        [Mixed Case] nvarchar(20), [order] int)""",
    """INSERT INTO dbo.ds_types VALUES
     (1, 10, 12.50, N'alpha', 'A-1', 1, '2024-01-15', '2024-01-15 10:30:00 +00:00',
      '2024-01-15 10:30:00', '00000000-0000-0000-0000-000000000001', 0x00FF, 0.5, 1.1, 255,
      N'Upper', 3),
     (2, 20, -0.01, N'beta', 'B_2', 0, '2024-01-31', '2024-01-31 23:59:59.999 +00:00',
      '2024-01-31 23:59:59.5', '00000000-0000-0000-0000-000000000002', 0x, -1, 0, 0,
      N'lower', 1),
     (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL),
     (4, 40, 99999999999999.99, N'O''Brien; DROP TABLE ds_types; --', 'x[y]z', 1, '2024-02-01',
      '2024-02-01 00:00:00 +05:00', '2024-02-01 00:00:00', '00000000-0000-0000-0000-000000000004',
      0x41, 1e300, 2.5, 4, N'ünï😀', 2),
     (5, 50, 0, N'a%b_c', '100%', 0, '2023-12-31', '2023-12-31 12:00:00 +00:00',
      '2023-12-31 12:00:00', '00000000-0000-0000-0000-000000000005', 0x, 0.25, -1, 5, NULL, 5)""",
    "CREATE TABLE dbo.ds_big (id int, label nvarchar(20))",
    """INSERT INTO dbo.ds_big SELECT TOP 25000
        ROW_NUMBER() OVER (ORDER BY (SELECT NULL)), NULL
       FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b""",
    "UPDATE dbo.ds_big SET label = CONCAT('row ', id)",
    "CREATE TABLE dbo.ds_empty (id bigint)",
    # Case-insensitive columns, as on most servers: filters must still compare exactly.
    """CREATE TABLE dbo.ds_text (id int, v varchar(20) COLLATE SQL_Latin1_General_CP1_CI_AS,
        nv nvarchar(20) COLLATE Latin1_General_100_CI_AI, c char(4), f bit)""",
    """INSERT INTO dbo.ds_text VALUES (1, 'a', N'a', 'a', 1), (2, 'a ', N'a ', 'a ', 0),
        (3, 'A', N'Á', 'A', NULL), (4, 'a' + CHAR(9), N'a' + NCHAR(9), 'a' + CHAR(9), 1),
        (5, 'b', N'b', 'b', 0), (6, NULL, NULL, NULL, NULL)""",
    "CREATE VIEW dbo.ds_view AS SELECT id FROM dbo.ds_types",
    "CREATE TABLE ds_sales.orders (id int, total decimal(10,2))",
    "INSERT INTO ds_sales.orders VALUES (7, 70.00)",
]


def _prepare(admin: Endpoint) -> Endpoint:
    create = f"IF DB_ID('{DATABASE}') IS NULL CREATE DATABASE {DATABASE}"
    asyncio.run(mssql_execute(admin, [create]))
    target = endpoint_with(admin, database_name=DATABASE)
    asyncio.run(mssql_execute(target, SETUP))
    return target


def _drop(admin: Endpoint) -> None:
    drop = (
        f"IF DB_ID('{DATABASE}') IS NOT NULL BEGIN "
        f"ALTER DATABASE {DATABASE} SET SINGLE_USER WITH ROLLBACK IMMEDIATE; "
        f"DROP DATABASE {DATABASE}; END"
    )
    asyncio.run(mssql_execute(admin, [drop]))


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    with sql_server() as admin:
        try:
            yield _prepare(admin)
        finally:
            _drop(admin)


def _reader(endpoint: Endpoint, **options: Any) -> SqlServerReader:
    return SqlServerReader(driver=endpoint.options.get("driver"), **options)


@pytest.fixture
def reader(endpoint: Endpoint) -> SqlServerReader:
    return _reader(endpoint)


async def read_table(
    reader: SqlServerReader,
    endpoint: Endpoint,
    name: str,
    fields: Sequence[str] | None = None,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None,
) -> list[dict[str, Any]]:
    schema = await reader.discover(endpoint, ["dbo", "ds_sales"])
    return await extract_rows(reader, endpoint, table_read(schema, name, fields, filters))


async def ids(
    reader: SqlServerReader,
    endpoint: Endpoint,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]],
) -> list[int]:
    rows = await read_table(reader, endpoint, "ds_types", ["id"], filters)
    return sorted(row["id"] for row in rows)


# --- connect ----------------------------------------------------------------------------------


async def test_connection_test_succeeds(reader: SqlServerReader, endpoint: Endpoint) -> None:
    await reader.test(endpoint, timeout=10)


async def test_wrong_password_is_unavailable_without_showing_it(endpoint: Endpoint) -> None:
    password = "wrong; p@ss={x} ünï"
    with pytest.raises(DatasourceUnavailable) as caught:
        await _reader(endpoint).test(endpoint_with(endpoint, password=password), timeout=10)
    assert str(caught.value) == "failed to connect to datasource"
    assert password not in repr(caught.value)


# --- discover ---------------------------------------------------------------------------------


async def test_discover_lists_dbo_tables_with_typed_columns_in_order(
    reader: SqlServerReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_types"]
    assert (table.schema, table.name) == ("dbo", "ds_types")
    assert [(c.name, c.data_type) for c in table.columns] == [
        ("id", "bigint"), ("n", "int"), ("amount", "decimal"), ("label", "nvarchar"),
        ("code", "varchar"), ("active", "bit"), ("day", "date"), ("at_tz", "datetimeoffset"),
        ("at_local", "datetime2"), ("ref", "uniqueidentifier"), ("blob", "varbinary"),
        ("ratio", "float"), ("r", "real"), ("tiny", "tinyint"), ("Mixed Case", "nvarchar"),
        ("order", "int"),
    ]  # fmt: skip
    assert "ds_view" not in schema.tables
    assert not [n for n in schema.tables if n.startswith("ds_sales.")]
    assert schema.tables["ds_empty"].columns == (Column("id", "bigint"),)


async def test_discover_scope_qualifies_other_schemas_and_leaves_out_system_ones(
    reader: SqlServerReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, ["dbo", "ds_sales", "sys", "INFORMATION_SCHEMA"])
    assert schema.tables["ds_sales.orders"].schema == "ds_sales"
    assert not [n for n in schema.tables if n.lower().startswith(("sys.", "information_schema"))]
    assert set((await reader.discover(endpoint, ["ds_sales"])).tables) == {"ds_sales.orders"}


# --- extract and result format ----------------------------------------------------------------

EXPECTED: list[dict[str, Any]] = [
    {
        "id": 1, "n": 10, "amount": "12.50", "label": "alpha", "code": "A-1", "active": True,
        "day": "2024-01-15", "at_tz": "2024-01-15T10:30:00Z", "at_local": "2024-01-15T10:30:00Z",
        "ref": "00000000-0000-0000-0000-000000000001", "blob": "AP8=", "ratio": 0.5, "r": 1.1,
        "tiny": 255, "Mixed Case": "Upper", "order": 3,
    },
    {
        "id": 2, "n": 20, "amount": "-0.01", "label": "beta", "code": "B_2", "active": False,
        "day": "2024-01-31", "at_tz": "2024-01-31T23:59:59.999000Z",
        "at_local": "2024-01-31T23:59:59.500000Z", "ref": "00000000-0000-0000-0000-000000000002",
        "blob": "", "ratio": -1.0, "r": 0.0, "tiny": 0, "Mixed Case": "lower", "order": 1,
    },
    {
        "id": 3, "n": None, "amount": None, "label": None, "code": None, "active": None,
        "day": None, "at_tz": None, "at_local": None, "ref": None, "blob": None, "ratio": None,
        "r": None, "tiny": None, "Mixed Case": None, "order": None,
    },
    {
        "id": 4, "n": 40, "amount": "99999999999999.99", "label": HOSTILE, "code": "x[y]z",
        "active": True, "day": "2024-02-01", "at_tz": "2024-01-31T19:00:00Z",
        "at_local": "2024-02-01T00:00:00Z", "ref": "00000000-0000-0000-0000-000000000004",
        "blob": "QQ==", "ratio": 1e300, "r": 2.5, "tiny": 4, "Mixed Case": "ünï😀", "order": 2,
    },
    {
        "id": 5, "n": 50, "amount": "0.00", "label": "a%b_c", "code": "100%", "active": False,
        "day": "2023-12-31", "at_tz": "2023-12-31T12:00:00Z", "at_local": "2023-12-31T12:00:00Z",
        "ref": "00000000-0000-0000-0000-000000000005", "blob": "", "ratio": 0.25, "r": -1.0,
        "tiny": 5, "Mixed Case": None, "order": 5,
    },
]  # fmt: skip


async def test_wildcard_extracts_every_column_in_the_common_format(
    reader: SqlServerReader, endpoint: Endpoint
) -> None:
    rows = await read_table(reader, endpoint, "ds_types")
    assert sorted(rows, key=lambda r: r["id"]) == EXPECTED


async def test_row_objects_have_sorted_keys(reader: SqlServerReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_types"]
    read = TableRead("ds_types", table, table.columns)
    [chunk] = [c async for c in extract(reader, endpoint, [read])]
    first = json.loads(b"[" + chunk.data + b"]", object_pairs_hook=lambda pairs: pairs)[0]
    assert [key for key, _ in first] == sorted(key for key, _ in first)


async def test_projection_and_other_schemas(reader: SqlServerReader, endpoint: Endpoint) -> None:
    rows = await read_table(reader, endpoint, "ds_types", ["order", "Mixed Case", "id"])
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": e["id"], "order": e["order"], "Mixed Case": e["Mixed Case"]} for e in EXPECTED
    ]
    assert await read_table(reader, endpoint, "ds_sales.orders") == [{"id": 7, "total": "70.00"}]


async def test_large_table_streams_in_chunks(endpoint: Endpoint) -> None:
    reader = _reader(endpoint, chunk_rows=10_000)
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_big"]
    read = TableRead("ds_big", table, table.columns)
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert [c.rows for c in chunks] == [10_000, 10_000, 5_000]
    rows = [row for chunk in chunks for row in parse(chunk)]
    assert sorted(r["id"] for r in rows) == list(range(1, 25_001))
    assert {"id": 25_000, "label": "row 25000"} in rows


async def test_empty_table_yields_nothing(reader: SqlServerReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["ds_empty"]
    read = TableRead("ds_empty", table, table.columns)
    assert [c async for c in extract(reader, endpoint, [read])] == []


async def test_query_failure_is_datasource_query_failed(
    reader: SqlServerReader, endpoint: Endpoint
) -> None:
    gone = Table(schema="dbo", name="ds_no_such_table", columns=(Column("id", "bigint"),))
    with pytest.raises(DatasourceQueryFailed):
        [c async for c in extract(reader, endpoint, [TableRead("gone", gone, gone.columns)])]


# --- filter -----------------------------------------------------------------------------------

FILTER_CASES: list[tuple[str, dict[str, dict[str, tuple[Any, ...]]], list[int]]] = [
    ("eq int", {"n": {"eq": (10,)}}, [1]),
    ("eq int from string", {"n": {"eq": ("20",)}}, [2]),
    ("eq several", {"n": {"eq": (10, 40)}}, [1, 4]),
    ("eq null", {"n": {"eq": (None,)}}, [3]),
    ("ne excludes nulls", {"n": {"ne": (10,)}}, [2, 4, 5]),
    ("ne several", {"n": {"ne": (10, 20)}}, [4, 5]),
    ("gt", {"n": {"gt": (20,)}}, [4, 5]),
    ("lte", {"n": {"lte": (20.0,)}}, [1, 2]),
    ("between decimal", {"amount": {"between": ("-0.01", 12.5)}}, [1, 2, 5]),
    ("eq bit", {"active": {"eq": (True,)}}, [1, 4]),
    ("eq bit string", {"active": {"eq": ("false",)}}, [2, 5]),
    ("tinyint above 127", {"tiny": {"eq": (255,)}}, [1]),
    ("eq date", {"day": {"eq": ("2024-01-31",)}}, [2]),
    ("gte datetimeoffset", {"at_tz": {"gte": ("2024-01-31T19:00:00Z",)}}, [2, 4]),
    ("gt datetimeoffset offset", {"at_tz": {"gt": ("2024-02-01T00:00:00+05:00",)}}, [2]),
    ("between datetime2 end of day", {"at_local": {"between": ("2024-01-01", "2024-01-31")}},
     [1, 2]),
    ("eq uniqueidentifier", {"ref": {"eq": ("00000000-0000-0000-0000-000000000004",)}}, [4]),
    ("in text", {"code": {"in": ("A-1", "B_2")}}, [1, 2]),
    ("nin text", {"code": {"nin": ("A-1", "B_2")}}, [4, 5]),
    ("like prefix", {"label": {"like": ("a%",)}}, [1, 5]),
    ("like single char", {"code": {"like": ("B_2",)}}, [2]),
    ("like escaped wildcards", {"label": {"like": ("a\\%b\\_c",)}}, [5]),
    ("like brackets are plain", {"code": {"like": ("x[y]%",)}}, [4]),
    ("like on integer", {"n": {"like": ("1%",)}}, [1]),
    ("like on uniqueidentifier", {"ref": {"like": ("%0-00000000000_",)}},
     [1, 2, 4, 5]),
    ("gt text by code point", {"label": {"gt": ("a",)}}, [1, 2, 5]),
    ("eq unicode", {"Mixed Case": {"eq": ("ünï😀",)}}, [4]),
    ("eq reserved word column", {"order": {"eq": (2,)}}, [4]),
    ("hostile value matches literally", {"label": {"eq": (HOSTILE,)}}, [4]),
    ("operators AND-ed", {"n": {"gte": (10,), "lte": (40,), "ne": (20,)}}, [1, 4]),
    ("fields AND-ed", {"n": {"gt": (10,)}, "active": {"eq": (False,)}}, [2, 5]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"), [pytest.param(f, e, id=name) for name, f, e in FILTER_CASES]
)
async def test_filters(
    reader: SqlServerReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    assert await ids(reader, endpoint, filters) == expected


TEXT_CASES: list[tuple[str, dict[str, dict[str, tuple[Any, ...]]], list[int]]] = [
    ("eq is case-sensitive and not padded", {"v": {"eq": ("a",)}}, [1]),
    ("eq keeps trailing spaces", {"v": {"eq": ("a ",)}}, [2]),
    ("eq is accent-sensitive", {"nv": {"eq": ("A",)}}, []),
    ("in", {"nv": {"in": ("Á", "b")}}, [3, 5]),
    ("ne", {"v": {"ne": ("a",)}}, [2, 3, 4, 5]),
    ("nin", {"nv": {"nin": ("a", "a ")}}, [3, 4, 5]),
    ("gt by code point", {"v": {"gt": ("a",)}}, [2, 4, 5]),
    ("lt by code point", {"v": {"lt": ("a",)}}, [3]),
    ("between", {"nv": {"between": ("a", "a ")}}, [1, 2, 4]),
    ("like is not padded", {"v": {"like": ("a",)}}, [1]),
    ("like one more character", {"nv": {"like": ("a_",)}}, [2, 4]),
    ("like is case-sensitive", {"v": {"like": ("A%",)}}, [3]),
    ("char compares as stored", {"c": {"eq": ("a   ",)}}, [1, 2]),
    ("char without its padding", {"c": {"eq": ("a",)}}, []),
    ("like on bit sees true/false, never null", {"f": {"like": ("%e",)}}, [1, 2, 4, 5]),
    ("like on bit", {"f": {"like": ("f%",)}}, [2, 5]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"), [pytest.param(f, e, id=name) for name, f, e in TEXT_CASES]
)
async def test_text_compares_exactly_whatever_the_collation(
    reader: SqlServerReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    rows = await read_table(reader, endpoint, "ds_text", ["id"], filters)
    assert sorted(row["id"] for row in rows) == expected


async def test_unconvertible_values_are_invalid_requests(
    reader: SqlServerReader, endpoint: Endpoint
) -> None:
    with pytest.raises(InvalidRequest, match="operator 'eq' expects an integer"):
        await ids(reader, endpoint, {"n": {"eq": ("abc",)}})


# --- what the ODBC driver sends (FreeTDS only, no server) --------------------------------------


def _freetds_installed() -> bool:
    try:
        import pyodbc
    except ImportError:
        return False
    return DEFAULT_DRIVER in pyodbc.drivers()


needs_freetds = pytest.mark.skipif(
    not _freetds_installed(),
    reason="the FreeTDS ODBC driver is not installed (apt-get install tdsodbc unixodbc-dev)",
)


class FakeTdsServer:
    """Answers PRELOGIN (no encryption), reads LOGIN7 and records the user name, password and
    database it carries, then hangs up."""

    def __init__(self) -> None:
        self.logins: list[tuple[str, str, str]] = []

    async def __aenter__(self) -> FakeTdsServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    @staticmethod
    async def _message(reader: asyncio.StreamReader) -> bytes:
        data = b""
        while True:
            header = await reader.readexactly(8)
            data += await reader.readexactly(struct.unpack(">H", header[2:4])[0] - 8)
            if header[1] & 1:
                return data

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._message(reader)
            options = b"\x00" + struct.pack(">HH", 11, 6) + b"\x01" + struct.pack(">HH", 17, 1)
            payload = options + b"\xff" + bytes([15, 0, 7, 208, 0, 0]) + b"\x02"
            writer.write(struct.pack(">BBHHBB", 4, 1, 8 + len(payload), 0, 1, 0) + payload)
            await writer.drain()
            login = await self._message(reader)

            def field(at: int) -> bytes:
                offset, chars = struct.unpack("<HH", login[at : at + 4])
                return login[offset : offset + 2 * chars]

            password = bytes(((b ^ 0xA5) << 4 & 0xF0) | ((b ^ 0xA5) >> 4) for b in field(44))
            self.logins.append(
                (
                    field(40).decode("utf-16-le"),
                    password.decode("utf-16-le"),
                    field(68).decode("utf-16-le"),
                )
            )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@needs_freetds
@pytest.mark.parametrize(
    ("user", "password", "database"),
    [
        ("reader", "s3cr3t", "sales"),
        ("us;er", "p;{w=1;PWD={y;DumpFile=/tmp/x ünï @:/?#&+%", "d;b={x"),
    ],
)
async def test_freetds_sends_credentials_byte_for_byte(
    user: str, password: str, database: str
) -> None:
    async with FakeTdsServer() as server:
        target = Endpoint(
            type=DatabaseType.SQL_SERVER, host="127.0.0.1", port=server.port,
            database_name=database, user_name=user, password=password,
        )  # fmt: skip
        with pytest.raises(DatasourceUnavailable) as caught:
            await SqlServerReader(driver=DEFAULT_DRIVER).test(target, timeout=5)
    assert server.logins[:1] == [(user, password, database)]
    assert password not in str(caught.value)


@needs_freetds
async def test_freetds_refuses_a_closing_brace_before_dialling() -> None:
    async with FakeTdsServer() as server:
        target = Endpoint(
            type=DatabaseType.SQL_SERVER, host="127.0.0.1", port=server.port,
            database_name="d", user_name="u", password="x};DumpFile={/tmp/x",
        )  # fmt: skip
        with pytest.raises(InvalidRequest):
            await SqlServerReader(driver=DEFAULT_DRIVER).test(target, timeout=5)
    assert server.logins == []
