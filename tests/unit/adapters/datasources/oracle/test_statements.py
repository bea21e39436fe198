"""Oracle statements (discovery, projection, filters), the rows they encode and the session
they run in, without a server."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import oracledb
import pytest

from adapters.datasources.oracle.reader import OracleReader
from adapters.datasources.oracle.statements import (
    OracleColumn,
    discovery_statement,
    is_system,
    like_pattern,
    select_statement,
    table_key,
)
from adapters.datasources.oracle.values import column_type
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.names import normalise_field, normalise_table
from domain.schema import Table, TableRead

ENDPOINT = Endpoint(
    type=DatabaseType.ORACLE,
    host="db.example",
    port=1521,
    database_name="ignored",
    user_name="reader",
    password="p@ss:w/rd ünï",
    options={"serviceName": "FREEPDB1"},
)
PHYSICAL = [
    ("ID", "number(10,0)"), ("BIG", "number(*,0)"), ("AMOUNT", "number(18,2)"),
    ("N", "number"), ("F", "float"), ("BF", "binary_float"), ("BD", "binary_double"),
    ("LABEL", "varchar2"), ("NLABEL", "nvarchar2"), ("LETTER", "char"), ("NOTE", "clob"),
    ("NNOTE", "nclob"), ("DAY", "date"), ("AT", "timestamp(6)"),
    ("AT_TZ", "timestamp(6) with time zone"), ("AT_LOCAL", "timestamp(6) with local time zone"),
    ("SPAN", "interval day(2) to second(6)"), ("AGE", "interval year(2) to month"),
    ("RAWV", "raw"), ("BLOBV", "blob"), ("RID", "rowid"), ("FLAG", "boolean"),
    ("Mixed Case", "varchar2"), ("lower", "number(10,0)"), ("ORDER", "number(10,0)"),
]  # fmt: skip
COLUMNS = tuple(OracleColumn(name.upper(), kind, name) for name, kind in PHYSICAL)
TABLE = Table("HR", "Orders", COLUMNS)
COLUMN = {name.upper(): f'"HR"."Orders"."{name}"' for name, _ in PHYSICAL}


def statement(
    columns: tuple[str, ...] = ("ID",), filters: dict[str, dict[str, tuple[Any, ...]]] | None = None
) -> tuple[str, dict[str, Any]]:
    read = TableRead(
        "HR.ORDERS", TABLE, tuple(c for c in COLUMNS if c.name in columns), filters or {}
    )
    found = select_statement(ENDPOINT, read)
    assert found is not None
    return found.sql, found.params


def where(filters: dict[str, dict[str, tuple[Any, ...]]]) -> tuple[str, dict[str, Any]]:
    sql, params = statement(("ID",), filters)
    return sql.split("\nWHERE ", 1)[1], params


# --- discovery --------------------------------------------------------------------------------


def test_discovery_reads_the_owners_tables_with_bound_owners() -> None:
    sql, params = discovery_statement(["HR", "READER"])
    assert sql == (
        'SELECT "ALL_TABLES"."OWNER", "ALL_TABLES"."TABLE_NAME", "ALL_TAB_COLUMNS"."COLUMN_NAME", '
        '"ALL_TAB_COLUMNS"."DATA_TYPE", "ALL_TAB_COLUMNS"."DATA_PRECISION", '
        '"ALL_TAB_COLUMNS"."DATA_SCALE" \n'
        'FROM "ALL_TABLES" JOIN "ALL_TAB_COLUMNS" '
        'ON "ALL_TAB_COLUMNS"."OWNER" = "ALL_TABLES"."OWNER" '
        'AND "ALL_TAB_COLUMNS"."TABLE_NAME" = "ALL_TABLES"."TABLE_NAME" \n'
        'WHERE "ALL_TABLES"."OWNER" IN (:p1_1, :p1_2) '
        'ORDER BY "ALL_TABLES"."OWNER", "ALL_TABLES"."TABLE_NAME", "ALL_TAB_COLUMNS"."COLUMN_ID"'
    )  # fmt: skip
    assert params == {"p1_1": "HR", "p1_2": "READER"}


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("SYS", True), ("system", True), ("XDB", True), ("BIN$abc==$0", True),
        ("LOGMNR_LOG", True), ("REDO_X", True), ("MVIEW$_X", True), ("AQ$_Q", True),
        ("DEF$_X", True), ("REPCAT$_X", True), ("SQLPLUS_PRODUCT_PROFILE", True),
        ("PLAN_TABLE", True), ("APEX_PUBLIC_USER", True), ("ANONYMOUS", True),
        ("EMPLOYEES", False), ("HR", False), ("SYSTEMS", False), ("my_redo", False),
    ],
)  # fmt: skip
def test_system_objects_are_recognised(name: str, system: bool) -> None:
    assert is_system(name) is system


def test_tables_are_keyed_upper_case_and_qualified_unless_the_users_own() -> None:
    assert table_key("READER", "Orders", "READER") == "ORDERS"
    assert table_key("HR", "Orders", "READER") == "HR.ORDERS"
    assert normalise_table(DatabaseType.ORACLE, "hr.orders") == "HR.ORDERS"
    assert normalise_field(DatabaseType.ORACLE, "mixed case") == TABLE.columns[22].name.upper()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("NUMBER", 10, 0), "number(10,0)"),
        (("NUMBER", None, 0), "number(*,0)"),
        (("NUMBER", 18, 2), "number(18,2)"),
        (("NUMBER", None, None), "number"),
        (("VARCHAR2", None, None), "varchar2"),
        (("TIMESTAMP(6) WITH TIME ZONE", None, 6), "timestamp(6) with time zone"),
    ],
)
def test_column_types_as_oracle_writes_them(args: tuple[Any, ...], expected: str) -> None:
    assert column_type(*args) == expected


# --- projection and result format -------------------------------------------------------------


def test_projection_uses_physical_names_quoted_and_named_parameters() -> None:
    sql, params = statement(("ORDER", "MIXED CASE", "LOWER", "ID"))
    assert sql == (
        'SELECT "HR"."Orders"."ID", "HR"."Orders"."lower", "HR"."Orders"."Mixed Case", '
        '"HR"."Orders"."ORDER" \nFROM "HR"."Orders"'
    )
    assert params == {}


def test_no_columns_means_no_statement() -> None:
    assert select_statement(ENDPOINT, TableRead("HR.ORDERS", TABLE, ())) is None


@pytest.mark.parametrize(
    ("name", "expression"),
    [
        ("AT_TZ", "sys_extract_utc({c}) AS sys_extract_utc_1"),
        ("AT_LOCAL", "sys_extract_utc({c}) AS sys_extract_utc_1"),
        ("AT", "{c}"),
        ("DAY", "{c}"),
        ("NOTE", "{c}"),
    ],
)
def test_time_zone_columns_are_read_in_utc(name: str, expression: str) -> None:
    sql, _ = statement((name,))
    assert sql == f'SELECT {expression.format(c=COLUMN[name])} \nFROM "HR"."Orders"'


def encode(values: dict[str, Any]) -> dict[str, Any]:
    read = TableRead("HR.ORDERS", TABLE, tuple(c for c in COLUMNS if c.name in values))
    found = select_statement(ENDPOINT, read)
    assert found is not None
    names = sorted(values)
    return json.loads(found.encoder.encode([tuple(values[n] for n in names)]))  # type: ignore[no-any-return]


def test_values_as_oracledb_returns_them_encode_in_the_common_format() -> None:
    row = {
        "ID": 1, "BIG": 10**20, "AMOUNT": Decimal("12.5"), "N": Decimal("3"),
        "F": Decimal("0.1"), "BF": 1.100000023841858, "BD": float("nan"), "LABEL": "ünï😀",
        "NLABEL": "n", "LETTER": "x  ", "NOTE": "long text", "NNOTE": "n",
        "DAY": datetime(2024, 1, 15, 10, 30), "AT": datetime(2024, 1, 31, 23, 59, 59, 500000),
        "AT_TZ": datetime(2024, 1, 31, 19, 0), "AT_LOCAL": datetime(2024, 2, 1),
        "SPAN": timedelta(days=1, hours=2, seconds=3.5), "AGE": oracledb.IntervalYM(1, 2),
        "RAWV": b"\x00\xff", "BLOBV": b"A", "RID": "AAAR3sAAEAAAACXAAA", "FLAG": True,
        "MIXED CASE": None, "LOWER": 0, "ORDER": 3,
    }  # fmt: skip
    assert encode(row) == {
        "ID": 1, "BIG": 10**20, "AMOUNT": "12.5", "N": "3", "F": "0.1", "BF": 1.1, "BD": "NaN",
        "LABEL": "ünï😀", "NLABEL": "n", "LETTER": "x  ", "NOTE": "long text", "NNOTE": "n",
        "DAY": "2024-01-15T10:30:00Z", "AT": "2024-01-31T23:59:59.500000Z",
        "AT_TZ": "2024-01-31T19:00:00Z", "AT_LOCAL": "2024-02-01T00:00:00Z",
        "SPAN": "P1DT2H3.5S", "AGE": "P1Y2M", "RAWV": "AP8=", "BLOBV": "QQ==",
        "RID": "AAAR3sAAEAAAACXAAA", "FLAG": True, "MIXED CASE": None, "LOWER": 0, "ORDER": 3,
    }  # fmt: skip


def test_negative_intervals_and_infinities() -> None:
    assert encode({"AGE": oracledb.IntervalYM(-1, -6), "BD": float("-inf")}) == {
        "AGE": "-P1Y6M", "BD": "-Infinity",
    }  # fmt: skip


@pytest.mark.parametrize("name", ['SAY "HI"', "C:\\DIR", "TAB\tHERE", "LINE\nBREAK"])
def test_column_names_msgspec_cannot_rename_a_field_to_still_encode(name: str) -> None:
    columns = (OracleColumn(name, "binary_float", name.lower()), OracleColumn("ID", "number(10,0)"))
    table = Table("HR", "Odd", columns)
    found = select_statement(ENDPOINT, TableRead("HR.ODD", table, columns))
    assert found is not None
    rows = [{"ID": 1, name: 1.100000023841858}, {"ID": 2, name: None}]
    data = found.encoder.encode([tuple(row[n] for n in found.encoder.names) for row in rows])
    assert json.loads(b"[" + data + b"]") == [{"ID": 1, name: 1.1}, {"ID": 2, name: None}]


# --- filters: every operator ------------------------------------------------------------------

ID_COL = COLUMN["ID"]
OPERATOR_CASES: list[tuple[str, dict[str, tuple[Any, ...]], str, dict[str, Any]]] = [
    ("eq", {"eq": (1,)}, f"{ID_COL} = :p1", {"p1": Decimal(1)}),
    ("eq several", {"eq": (1, "2")}, f"{ID_COL} IN (:p1_1, :p1_2)",
     {"p1_1": Decimal(1), "p1_2": Decimal(2)}),
    ("eq null", {"eq": (None,)}, f"{ID_COL} IS NULL", {}),
    ("eq null or value", {"eq": (None, 1)}, f"{ID_COL} IS NULL OR {ID_COL} = :p1",
     {"p1": Decimal(1)}),
    ("ne", {"ne": (1,)}, f"{ID_COL} != :p1", {"p1": Decimal(1)}),
    ("ne several", {"ne": (1, 2)}, f"({ID_COL} NOT IN (:p1_1, :p1_2))",
     {"p1_1": Decimal(1), "p1_2": Decimal(2)}),
    ("ne null", {"ne": (None,)}, f"{ID_COL} IS NOT NULL", {}),
    ("gt", {"gt": (1,)}, f"{ID_COL} > :p1", {"p1": Decimal(1)}),
    ("gte", {"gte": (1,)}, f"{ID_COL} >= :p1", {"p1": Decimal(1)}),
    ("lt", {"lt": (1,)}, f"{ID_COL} < :p1", {"p1": Decimal(1)}),
    ("lte", {"lte": ("1.5",)}, f"{ID_COL} <= :p1", {"p1": Decimal("1.5")}),
    ("between", {"between": (1, 5)}, f"{ID_COL} >= :p1 AND {ID_COL} <= :p2",
     {"p1": Decimal(1), "p2": Decimal(5)}),
    ("in", {"in": (1, 2)}, f"{ID_COL} IN (:p1_1, :p1_2)", {"p1_1": Decimal(1), "p1_2": Decimal(2)}),
    ("nin", {"nin": (1,)}, f"{ID_COL} != :p1", {"p1": Decimal(1)}),
    ("like", {"like": ("1%",)}, f"CAST({ID_COL} AS VARCHAR2(4000 CHAR)) LIKE :p1 ESCAPE '\\'",
     {"p1": "1%"}),
    ("several AND-ed in order", {"lte": (9,), "gte": (1,)}, f"{ID_COL} >= :p1 AND {ID_COL} <= :p2",
     {"p1": Decimal(1), "p2": Decimal(9)}),
    ("empty ignored", {"eq": ()}, "", {}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("condition", "sql", "params"),
    [pytest.param(c, s, p, id=name) for name, c, s, p in OPERATOR_CASES],
)
def test_every_operator_compiles_to_its_sql(
    condition: dict[str, tuple[Any, ...]], sql: str, params: dict[str, Any]
) -> None:
    full, found = statement(("ID",), {"ID": condition})
    assert (full.split("\nWHERE ", 1)[1] if sql else full) == (
        sql or 'SELECT "HR"."Orders"."ID" \nFROM "HR"."Orders"'
    )
    assert found == params


def test_parameters_are_named_whatever_the_column_names() -> None:
    sql, params = where(
        {"MIXED CASE": {"eq": ("a", "b")}, "LOWER": {"gt": (1,)}, "ORDER": {"ne": (2,)}}
    )
    assert sql == (
        f"{COLUMN['MIXED CASE']} IN (:p1_1, :p1_2) AND {COLUMN['LOWER']} > :p2 "
        f"AND {COLUMN['ORDER']} != :p3"
    )
    assert params == {"p1_1": "a", "p1_2": "b", "p2": Decimal(1), "p3": Decimal(2)}


def test_hostile_values_stay_parameters() -> None:
    hostile = "x'); DROP TABLE Orders; --"
    assert where({"LABEL": {"eq": (hostile,)}}) == (f"{COLUMN['LABEL']} = :p1", {"p1": hostile})


# --- filters: every column type ---------------------------------------------------------------

TYPE_CASES: list[tuple[str, dict[str, tuple[Any, ...]], str, dict[str, Any]]] = [
    ("BIG", {"gt": (2**70,)}, "{c} > :p1", {"p1": Decimal(2**70)}),
    ("AMOUNT", {"gte": ("12.49",)}, "{c} >= :p1", {"p1": Decimal("12.49")}),
    ("N", {"eq": (3,)}, "{c} = :p1", {"p1": Decimal(3)}),
    ("F", {"lt": (0.5,)}, "{c} < :p1", {"p1": 0.5}),
    ("BF", {"gt": ("0.25",)}, "{c} > :p1", {"p1": 0.25}),
    ("BD", {"lte": (1,)}, "{c} <= :p1", {"p1": 1.0}),
    ("LABEL", {"eq": (42,)}, "{c} = :p1", {"p1": "42"}),
    ("NLABEL", {"in": ("a", "b")}, "{c} IN (:p1_1, :p1_2)", {"p1_1": "a", "p1_2": "b"}),
    ("LETTER", {"like": ("x%",)}, "{c} LIKE :p1 ESCAPE '\\'", {"p1": "x%"}),
    ("NOTE", {"eq": ("t",)}, "dbms_lob.substr({c}, :p1, :p2) = :p3",
     {"p1": 4000, "p2": 1, "p3": "t"}),
    ("NNOTE", {"like": ("%t%",)}, "{c} LIKE :p1 ESCAPE '\\'", {"p1": "%t%"}),
    ("NOTE", {"gt": ("m",)}, "dbms_lob.substr({c}, :p1, :p2) > :p3",
     {"p1": 4000, "p2": 1, "p3": "m"}),
    ("FLAG", {"like": ("t%",)}, "lower(CAST({c} AS VARCHAR2(4000 CHAR))) LIKE :p1 ESCAPE '\\'",
     {"p1": "t%"}),
    ("AT_TZ", {"like": ("2024%",)},
     "CAST(sys_extract_utc({c}) AS VARCHAR2(4000 CHAR)) LIKE :p1 ESCAPE '\\'", {"p1": "2024%"}),
    ("LETTER", {"eq": ("x  ",)}, "{c} = :p1", {"p1": "x  "}),
    ("LABEL", {"gt": ("a",)}, "{c} > :p1", {"p1": "a"}),
    ("LABEL", {"ne": ("a", "B")}, "({c} NOT IN (:p1_1, :p1_2))", {"p1_1": "a", "p1_2": "B"}),
    ("DAY", {"between": ("2024-01-15", "2024-01-31")}, "{c} >= :p1 AND {c} <= :p2",
     {"p1": datetime(2024, 1, 15), "p2": datetime(2024, 1, 31, 23, 59, 59, 999999)}),
    ("DAY", {"eq": ("2024-01-15T10:30:00",)}, "{c} = :p1", {"p1": datetime(2024, 1, 15, 10, 30)}),
    ("AT", {"lt": ("2024-01-01T10:00:00+02:00",)}, "{c} < :p1", {"p1": datetime(2024, 1, 1, 8)}),
    ("AT_TZ", {"gte": ("2024-02-01T00:00:00+05:00",)}, "sys_extract_utc({c}) >= :p1",
     {"p1": datetime(2024, 1, 31, 19)}),
    ("AT_LOCAL", {"between": ("2024-01-01", "2024-01-31")},
     "sys_extract_utc({c}) >= :p1 AND sys_extract_utc({c}) <= :p2",
     {"p1": datetime(2024, 1, 1), "p2": datetime(2024, 1, 31, 23, 59, 59, 999999)}),
    ("SPAN", {"eq": ("+01 02:00:00",)}, "CAST({c} AS VARCHAR2(4000 CHAR)) = :p1",
     {"p1": "+01 02:00:00"}),
    ("RAWV", {"eq": ("00FF",)}, "CAST({c} AS VARCHAR2(4000 CHAR)) = :p1", {"p1": "00FF"}),
    ("RID", {"eq": ("AAAR",)}, "CAST({c} AS VARCHAR2(4000 CHAR)) = :p1", {"p1": "AAAR"}),
    ("FLAG", {"eq": ("true",)}, "{c} = :p1", {"p1": True}),
    ("MIXED CASE", {"like": ("a\\x\\%",)}, "{c} LIKE :p1 ESCAPE '\\'", {"p1": "ax\\%"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "condition", "sql", "params"),
    [pytest.param(n, c, s, p, id=f"{n}-{next(iter(c))}") for n, c, s, p in TYPE_CASES],
)
def test_every_column_type(
    name: str, condition: dict[str, tuple[Any, ...]], sql: str, params: dict[str, Any]
) -> None:
    assert where({name: condition}) == (sql.format(c=COLUMN[name]), params)


class _Cursor:
    def __init__(self, log: list[str], rows: list[tuple[Any, ...]]) -> None:
        self.log, self.rows = log, rows
        self.arraysize = self.prefetchrows = 0

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def execute(self, sql: str, params: Any = None, **options: Any) -> None:
        self.log.append(sql)

    async def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def close(self) -> None:
        pass


class _Connection:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.log: list[str] = []
        self.rows = rows

    def cursor(self) -> _Cursor:
        return _Cursor(self.log, self.rows)

    async def close(self) -> None:
        self.log.append("closed")


async def test_extraction_sessions_compare_text_binary_before_any_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _Connection([(1,), (2,)])

    async def connect(endpoint: Endpoint, timeout: float) -> _Connection:
        return connection

    reader = OracleReader()
    monkeypatch.setattr(reader, "_connect", connect)
    read = TableRead("HR.ORDERS", TABLE, tuple(c for c in COLUMNS if c.name == "ID"))
    prepared = reader.prepare(ENDPOINT, [read])
    chunks = [chunk async for chunk in reader.stream(ENDPOINT, prepared)]
    assert [chunk.data for chunk in chunks] == [b'{"ID":1},{"ID":2}']
    assert connection.log == [
        "ALTER SESSION SET NLS_COMP = BINARY NLS_SORT = BINARY",
        'SELECT "HR"."Orders"."ID" \nFROM "HR"."Orders"',
        "closed",
    ]


@pytest.mark.parametrize(
    ("pattern", "oracle"),
    [
        ("a%", "a%"),
        ("a\\%", "a\\%"),
        ("a\\_", "a\\_"),
        ("a\\\\b", "a\\\\b"),
        ("a\\b", "ab"),
        ("end\\", "end\\"),
        ("", ""),
    ],
)
def test_like_escapes_oracle_accepts(pattern: str, oracle: str) -> None:
    assert like_pattern(pattern) == oracle


@pytest.mark.parametrize(
    ("name", "condition", "fragment"),
    [
        ("AMOUNT", {"gt": ("1,5",)}, "operator 'gt' expects a decimal number"),
        ("DAY", {"lt": ("31/01/2024",)}, "operator 'lt' expects an ISO 8601"),
        ("AT_TZ", {"between": ("2024-01-01", "soon")}, "operator 'between' expects an ISO 8601"),
        ("BF", {"eq": ("x",)}, "operator 'eq' expects a number"),
        ("FLAG", {"eq": ("maybe",)}, "operator 'eq' expects a boolean"),
        ("ID", {"gt": (None,)}, "operator 'gt' does not accept null"),
        ("LABEL", {"like": ("a\\x\\",)}, "operator 'like' pattern must not end with the escape"),
        ("LABEL", {"ne": ("",)}, "expects a non-empty string (Oracle stores an empty string as"),
        ("NOTE", {"in": ("a", "")}, "expects a non-empty string"),
        ("RAWV", {"gt": ("",)}, "expects a non-empty string"),
    ],
)
def test_unconvertible_values_are_invalid_requests(
    name: str, condition: dict[str, tuple[Any, ...]], fragment: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        where({name: condition})
    assert caught.value.message.startswith(f"filter on 'HR.ORDERS.{name}' of database 'ignored': ")
    assert fragment in caught.value.message
