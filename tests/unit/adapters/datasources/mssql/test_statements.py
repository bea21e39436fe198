"""SQL Server statements (discovery, projection, filters) and the rows they encode, without a
driver or a server."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.datasources.mssql.statements import (
    discovery_statement,
    escape_brackets,
    is_system,
    select_statement,
    table_key,
)
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead

ENDPOINT = Endpoint(
    type=DatabaseType.SQL_SERVER,
    host="db.example",
    port=1433,
    database_name="sales",
    user_name="reader",
    password="secret",
)
TYPES = [
    ("id", "int"), ("small", "smallint"), ("tiny", "tinyint"), ("big", "bigint"),
    ("amount", "decimal"), ("price", "money"), ("ratio", "float"), ("r", "real"),
    ("flag", "bit"), ("label", "nvarchar"), ("code", "varchar"), ("letter", "char"),
    ("memo", "ntext"), ("old", "text"), ("day", "date"), ("clock", "time"),
    ("at", "datetime2"), ("legacy", "datetime"), ("small_at", "smalldatetime"),
    ("at_tz", "datetimeoffset"), ("ref", "uniqueidentifier"), ("blob", "varbinary"),
    ("version", "timestamp"), ("doc", "xml"), ("node", "hierarchyid"), ("variant", "sql_variant"),
    ("geo", "geography"), ("Mixed Case", "int"), ("order", "int"), ("we]ird", "int"),
]  # fmt: skip
TABLE = Table("dbo", "Orders", tuple(Column(n, t) for n, t in TYPES))
COLUMN = {n: f"[dbo].[Orders].[{n.replace(']', ']]')}]" for n, _ in TYPES}


def statement(
    columns: tuple[str, ...] = ("id",), filters: dict[str, dict[str, tuple[Any, ...]]] | None = None
) -> tuple[str, tuple[Any, ...]]:
    read = TableRead(
        "Orders", TABLE, tuple(c for c in TABLE.columns if c.name in columns), filters or {}
    )
    found = select_statement(ENDPOINT, read)
    assert found is not None
    return found.sql, found.params


def where(filters: dict[str, dict[str, tuple[Any, ...]]]) -> tuple[str, tuple[Any, ...]]:
    sql, params = statement(("id",), filters)
    return sql.split("\nWHERE ", 1)[1], params


# --- discovery --------------------------------------------------------------------------------


def test_discovery_reads_base_tables_of_the_scope_with_bound_schemas() -> None:
    sql, params = discovery_statement(["dbo", "sales"])
    assert sql == (
        "SELECT [INFORMATION_SCHEMA].[TABLES].[TABLE_SCHEMA], "
        "[INFORMATION_SCHEMA].[TABLES].[TABLE_NAME], [INFORMATION_SCHEMA].[COLUMNS].[COLUMN_NAME], "
        "[INFORMATION_SCHEMA].[COLUMNS].[DATA_TYPE] \n"
        "FROM [INFORMATION_SCHEMA].[TABLES] LEFT OUTER JOIN [INFORMATION_SCHEMA].[COLUMNS] "
        "ON [INFORMATION_SCHEMA].[COLUMNS].[TABLE_SCHEMA] = "
        "[INFORMATION_SCHEMA].[TABLES].[TABLE_SCHEMA] "
        "AND [INFORMATION_SCHEMA].[COLUMNS].[TABLE_NAME] = "
        "[INFORMATION_SCHEMA].[TABLES].[TABLE_NAME] \n"
        "WHERE [INFORMATION_SCHEMA].[TABLES].[TABLE_TYPE] = ? "
        "AND [INFORMATION_SCHEMA].[TABLES].[TABLE_SCHEMA] IN (?, ?) "
        "ORDER BY [INFORMATION_SCHEMA].[TABLES].[TABLE_SCHEMA], "
        "[INFORMATION_SCHEMA].[TABLES].[TABLE_NAME], "
        "[INFORMATION_SCHEMA].[COLUMNS].[ORDINAL_POSITION]"
    )  # fmt: skip
    assert params == ("BASE TABLE", "dbo", "sales")


@pytest.mark.parametrize(
    ("schema", "name", "system"),
    [
        ("sys", "objects", True), ("INFORMATION_SCHEMA", "TABLES", True),
        ("db_owner", "t", True), ("DB_datareader", "t", True), ("dbo", "db_log", True),
        ("dbo", "orders", False), ("sales", "dbx", False), ("system", "t", False),
    ],
)  # fmt: skip
def test_system_objects_are_recognised(schema: str, name: str, system: bool) -> None:
    assert is_system(schema, name) is system


def test_tables_are_keyed_without_dbo() -> None:
    assert table_key("dbo", "orders") == "orders"
    assert table_key("sales", "orders") == "sales.orders"


# --- projection and result format -------------------------------------------------------------


def test_projection_selects_quoted_columns_in_name_order() -> None:
    sql, params = statement(("order", "Mixed Case", "id", "we]ird"))
    assert sql == (
        "SELECT [dbo].[Orders].[Mixed Case], [dbo].[Orders].[id], [dbo].[Orders].[order], "
        "[dbo].[Orders].[we]]ird] \nFROM [dbo].[Orders]"
    )
    assert params == ()


def test_non_dbo_schemas_and_names_needing_quotes() -> None:
    table = Table("Sales Data", "Order Lines", (Column("id", "int"),))
    found = select_statement(ENDPOINT, TableRead("Sales Data.Order Lines", table, table.columns))
    assert found is not None
    assert found.sql == "SELECT [Sales Data].[Order Lines].[id] \nFROM [Sales Data].[Order Lines]"


def test_no_columns_means_no_statement() -> None:
    assert select_statement(ENDPOINT, TableRead("Orders", TABLE, ())) is None


@pytest.mark.parametrize(
    ("name", "expression"),
    [
        ("ref", "lower(CAST({c} AS CHAR(36))) AS lower_1"),
        ("at_tz", "CAST(switchoffset({c}, '+00:00') AS DATETIME2) AS switchoffset_1"),
        ("doc", "CAST({c} AS NVARCHAR(max)) AS [doc]"),
        ("node", "CAST({c} AS NVARCHAR(max)) AS [node]"),
        ("variant", "CAST({c} AS NVARCHAR(4000)) AS [variant]"),
        ("geo", "{c}.STAsText() AS anon_1"),
        ("at", "{c}"),
        ("blob", "{c}"),
        ("amount", "{c}"),
    ],
)
def test_types_without_a_direct_json_form_are_converted_on_the_server(
    name: str, expression: str
) -> None:
    sql, _ = statement((name,))
    assert sql == f"SELECT {expression.format(c=COLUMN[name])} \nFROM [dbo].[Orders]"


def encode(values: dict[str, Any]) -> dict[str, Any]:
    read = TableRead("Orders", TABLE, tuple(c for c in TABLE.columns if c.name in values), {})
    found = select_statement(ENDPOINT, read)
    assert found is not None
    names = sorted(values)
    data = found.encoder.encode([tuple(values[n] for n in names)])
    return json.loads(data)  # type: ignore[no-any-return]


def test_values_as_pyodbc_returns_them_encode_in_the_common_format() -> None:
    row = {
        "id": 1, "small": -2, "tiny": 255, "big": 2**62, "amount": Decimal("12.50"),
        "price": Decimal("99.9900"), "ratio": 0.1, "r": 1.100000023841858, "flag": True,
        "label": "ünï😀 \"q\" <&>", "code": "A-1", "letter": "x ", "memo": "m", "old": "o",
        "day": date(2024, 1, 15), "clock": time(13, 14, 15, 500000),
        "at": datetime(2024, 1, 15, 10, 30), "legacy": datetime(2024, 1, 31, 23, 59, 59, 997000),
        "small_at": datetime(2024, 2, 1, 0, 0), "at_tz": datetime(2024, 1, 31, 19, 0),
        "ref": "00000000-0000-0000-0000-000000000001", "blob": b"\x00\xff",
        "version": b"\x00\x00\x00\x00\x00\x00\x07\xd1", "doc": "<a>1</a>", "node": "/1/2/",
        "variant": "42", "geo": "POINT (1 2)", "Mixed Case": None, "order": 3, "we]ird": 0,
    }  # fmt: skip
    assert encode(row) == {
        "id": 1, "small": -2, "tiny": 255, "big": 2**62, "amount": "12.50", "price": "99.9900",
        "ratio": 0.1, "r": 1.1, "flag": True, "label": "ünï😀 \"q\" <&>", "code": "A-1",
        "letter": "x ", "memo": "m", "old": "o", "day": "2024-01-15", "clock": "13:14:15.500000",
        "at": "2024-01-15T10:30:00Z", "legacy": "2024-01-31T23:59:59.997000Z",
        "small_at": "2024-02-01T00:00:00Z", "at_tz": "2024-01-31T19:00:00Z",
        "ref": "00000000-0000-0000-0000-000000000001", "blob": "AP8=",
        "version": "AAAAAAAAB9E=", "doc": "<a>1</a>", "node": "/1/2/", "variant": "42",
        "geo": "POINT (1 2)", "Mixed Case": None, "order": 3, "we]ird": 0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("stored", "shown"),
    [(3.4028234663852886e38, 3.4028235e38), (-3.4028234663852886e38, -3.4028235e38),
     (1.401298464324817e-45, 1e-45), (0.0, 0.0)],
)  # fmt: skip
def test_real_values_at_the_ends_of_single_precision(stored: float, shown: float) -> None:
    assert encode({"r": stored}) == {"r": shown}


def test_rows_encode_with_sorted_keys_and_nulls() -> None:
    read = TableRead("Orders", TABLE, tuple(c for c in TABLE.columns if c.name in ("at", "id")))
    found = select_statement(ENDPOINT, read)
    assert found is not None
    assert found.encoder.encode([(None, 1), (datetime(2024, 1, 1), 2)]) == (
        b'{"at":null,"id":1},{"at":"2024-01-01T00:00:00Z","id":2}'
    )
    assert found.encoder.encode([]) == b""


@pytest.mark.parametrize("name", ['say "hi"', "C:\\dir", "tab\there", "line\nbreak", "nul\x00"])
def test_column_names_msgspec_cannot_rename_a_field_to_still_encode(name: str) -> None:
    table = Table("dbo", "Odd", (Column(name, "datetime2"), Column("id", "int")))
    found = select_statement(ENDPOINT, TableRead("Odd", table, table.columns))
    assert found is not None
    rows = [{name: datetime(2024, 1, 1), "id": 1}, {name: None, "id": 2}]
    data = found.encoder.encode([tuple(row[n] for n in found.encoder.names) for row in rows])
    decoded = json.loads(b"[" + data + b"]")
    assert decoded == [{name: "2024-01-01T00:00:00Z", "id": 1}, {name: None, "id": 2}]
    assert list(decoded[0]) == sorted([name, "id"])


# --- filters: every operator ------------------------------------------------------------------

ID_COL = COLUMN["id"]
# How SQL Server compares text exactly (SqlServerRules): the column side and the value side.
EXACT = "((CAST({c} AS NVARCHAR(max)) + NCHAR(0)) COLLATE Latin1_General_100_BIN2)"
VALUE = "(CAST(? AS NVARCHAR(max)) + NCHAR(0))"
PATTERN = "(? + NCHAR(0))"
OPERATOR_CASES: list[tuple[str, dict[str, tuple[Any, ...]], str, tuple[Any, ...]]] = [
    ("eq", {"eq": (1,)}, f"{ID_COL} = ?", (1,)),
    ("eq several", {"eq": (1, "2")}, f"{ID_COL} IN (?, ?)", (1, 2)),
    ("eq null", {"eq": (None,)}, f"{ID_COL} IS NULL", ()),
    ("eq null or value", {"eq": (None, 1)}, f"{ID_COL} IS NULL OR {ID_COL} = ?", (1,)),
    ("eq null or value AND-ed", {"eq": (None, 1), "gt": (0,)},
     f"({ID_COL} IS NULL OR {ID_COL} = ?) AND {ID_COL} > ?", (1, 0)),
    ("ne", {"ne": (1,)}, f"{ID_COL} != ?", (1,)),
    ("ne several", {"ne": (1, 2)}, f"({ID_COL} NOT IN (?, ?))", (1, 2)),
    ("ne null", {"ne": (None,)}, f"{ID_COL} IS NOT NULL", ()),
    ("gt", {"gt": (1,)}, f"{ID_COL} > ?", (1,)),
    ("gte", {"gte": (1,)}, f"{ID_COL} >= ?", (1,)),
    ("lt", {"lt": (1,)}, f"{ID_COL} < ?", (1,)),
    ("lte", {"lte": (1,)}, f"{ID_COL} <= ?", (1,)),
    ("between", {"between": (1, 5)}, f"{ID_COL} >= ? AND {ID_COL} <= ?", (1, 5)),
    ("in", {"in": (1, 2, 3)}, f"{ID_COL} IN (?, ?, ?)", (1, 2, 3)),
    ("nin", {"nin": (1, 2)}, f"({ID_COL} NOT IN (?, ?))", (1, 2)),
    ("like", {"like": ("1%",)}, f"{EXACT.format(c=ID_COL)} LIKE {PATTERN} ESCAPE '\\'", ("1%",)),
    ("several AND-ed in order", {"lte": (9,), "gte": (1,), "ne": (5,)},
     f"{ID_COL} >= ? AND {ID_COL} <= ? AND {ID_COL} != ?", (1, 9, 5)),
    ("empty ignored", {"eq": ()}, None, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("condition", "sql", "params"),
    [pytest.param(c, s, p, id=name) for name, c, s, p in OPERATOR_CASES],
)
def test_every_operator_compiles_to_its_sql(
    condition: dict[str, tuple[Any, ...]], sql: str | None, params: tuple[Any, ...]
) -> None:
    full, found = statement(("id",), {"id": condition})
    if sql is None:
        assert "WHERE" not in full
    else:
        assert full.split("\nWHERE ", 1)[1] == sql
    assert found == params


def test_fields_are_anded_and_values_never_reach_the_sql() -> None:
    hostile = "x'); DROP TABLE Orders; --"
    sql, params = where({"label": {"eq": (hostile,)}, "id": {"gt": (1,)}})
    assert sql == f"{EXACT.format(c=COLUMN['label'])} = {VALUE} AND {ID_COL} > ?"
    assert params == (hostile, 1)


# --- filters: every column type ---------------------------------------------------------------

TYPE_CASES: list[tuple[str, dict[str, tuple[Any, ...]], str, tuple[Any, ...]]] = [
    ("small", {"eq": ("7",)}, "{c} = ?", (7,)),
    ("tiny", {"eq": (255,)}, "{c} = ?", (255,)),
    ("big", {"gt": (2**40,)}, "{c} > ?", (2**40,)),
    ("amount", {"gte": ("12.49",)}, "{c} >= ?", (Decimal("12.49"),)),
    ("price", {"lt": (10,)}, "{c} < ?", (Decimal("10"),)),
    ("ratio", {"gt": ("0.25",)}, "{c} > ?", (0.25,)),
    ("r", {"lt": (1,)}, "{c} < ?", (1.0,)),
    ("flag", {"eq": ("true",)}, "{c} = ?", (True,)),
    ("flag", {"ne": (False,)}, "{c} != ?", (False,)),
    ("label", {"eq": (42,)}, f"{EXACT} = {VALUE}", ("42",)),
    ("code", {"like": ("A[1]%",)}, f"{EXACT} LIKE {PATTERN} ESCAPE '\\'", ("A\\[1]%",)),
    ("letter", {"in": ("a", "b")}, f"{EXACT} IN ({VALUE[1:-1]}, {VALUE[1:-1]})", ("a", "b")),
    ("memo", {"eq": ("m",)}, f"{EXACT} = {VALUE}", ("m",)),
    ("old", {"like": ("o%",)}, f"{EXACT} LIKE {PATTERN} ESCAPE '\\'", ("o%",)),
    ("day", {"between": ("2024-01-15", "2024-01-31")}, "{c} >= ? AND {c} <= ?",
     (date(2024, 1, 15), date(2024, 1, 31))),
    ("clock", {"gt": ("13:00",)}, "{c} > ?", (time(13, 0),)),
    ("at", {"between": ("2024-01-01", "2024-01-31")}, "{c} >= ? AND {c} <= ?",
     (datetime(2024, 1, 1), datetime(2024, 1, 31, 23, 59, 59, 999999))),
    ("legacy", {"gte": ("2024-01-01T10:00:00+02:00",)}, "{c} >= ?", (datetime(2024, 1, 1, 8),)),
    ("small_at", {"lt": ("2024-02-01",)}, "{c} < ?", (datetime(2024, 2, 1),)),
    ("at_tz", {"gte": ("2024-02-01T00:00:00+05:00",)}, "{c} >= ?", (datetime(2024, 1, 31, 19),)),
    ("ref", {"eq": ("00000000-0000-0000-0000-00000000000A",)}, "{c} = ?",
     ("00000000-0000-0000-0000-00000000000a",)),
    ("blob", {"like": ("%x%",)}, f"{EXACT} LIKE {PATTERN} ESCAPE '\\'", ("%x%",)),
    ("version", {"eq": ("x",)}, f"{EXACT} = {VALUE}", ("x",)),
    ("doc", {"eq": ("<a/>",)}, f"{EXACT} = {VALUE}", ("<a/>",)),
    ("Mixed Case", {"eq": (1,)}, "{c} = ?", (1,)),
    ("order", {"in": (1, 2)}, "{c} IN (?, ?)", (1, 2)),
    ("we]ird", {"eq": (1,)}, "{c} = ?", (1,)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "condition", "sql", "params"),
    [pytest.param(n, c, s, p, id=f"{n}-{next(iter(c))}") for n, c, s, p in TYPE_CASES],
)
def test_every_column_type(
    name: str, condition: dict[str, tuple[Any, ...]], sql: str, params: tuple[Any, ...]
) -> None:
    assert where({name: condition}) == (sql.format(c=COLUMN[name]), params)


# --- filters: text compares exactly ------------------------------------------------------------

LABEL = EXACT.format(c=COLUMN["label"])
TEXT_CASES: list[tuple[str, dict[str, tuple[Any, ...]], str, tuple[Any, ...]]] = [
    ("eq", {"eq": ("Ab ",)}, f"{LABEL} = {VALUE}", ("Ab ",)),
    ("eq several", {"eq": ("a", "B")}, f"{LABEL} IN ({VALUE[1:-1]}, {VALUE[1:-1]})", ("a", "B")),
    ("in", {"in": ("a",)}, f"{LABEL} = {VALUE}", ("a",)),
    ("in with null", {"in": (None, "a")},
     f"{COLUMN['label']} IS NULL OR {LABEL} = {VALUE}", ("a",)),
    ("ne", {"ne": ("a",)}, f"{LABEL} != {VALUE}", ("a",)),
    ("nin", {"nin": ("a", "b")}, f"({LABEL} NOT IN ({VALUE[1:-1]}, {VALUE[1:-1]}))", ("a", "b")),
    ("nin with null", {"nin": ("a", None)},
     f"{COLUMN['label']} IS NOT NULL AND {LABEL} != {VALUE}", ("a",)),
    ("gt", {"gt": ("a",)}, f"{LABEL} > {VALUE}", ("a",)),
    ("gte", {"gte": ("a",)}, f"{LABEL} >= {VALUE}", ("a",)),
    ("lt", {"lt": ("a",)}, f"{LABEL} < {VALUE}", ("a",)),
    ("lte", {"lte": ("a",)}, f"{LABEL} <= {VALUE}", ("a",)),
    ("between", {"between": ("a", "b")}, f"{LABEL} >= {VALUE} AND {LABEL} <= {VALUE}", ("a", "b")),
    ("like", {"like": ("a_[b]%",)}, f"{LABEL} LIKE {PATTERN} ESCAPE '\\'", ("a_\\[b]%",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("condition", "sql", "params"),
    [pytest.param(c, s, p, id=name) for name, c, s, p in TEXT_CASES],
)
def test_text_compares_exactly_under_a_binary_collation_without_padding(
    condition: dict[str, tuple[Any, ...]], sql: str, params: tuple[Any, ...]
) -> None:
    assert where({"label": condition}) == (sql, params)


@pytest.mark.parametrize(
    ("name", "condition", "sql", "params"),
    [
        ("flag", {"like": ("t%",)},
         "((CAST(CASE WHEN ({c} = ?) THEN 'true' WHEN ({c} = ?) THEN 'false' END AS NVARCHAR(max))"
         " + NCHAR(0)) COLLATE Latin1_General_100_BIN2) LIKE (? + NCHAR(0)) ESCAPE '\\'",
         (1, 0, "t%")),
        ("ref", {"like": ("0000%",)},
         "((CAST(lower(CAST({c} AS CHAR(36))) AS NVARCHAR(max)) + NCHAR(0)) "
         "COLLATE Latin1_General_100_BIN2) LIKE (? + NCHAR(0)) ESCAPE '\\'", ("0000%",)),
        ("geo", {"eq": ("POINT (1 2)",)},
         "((CAST({c}.STAsText() AS NVARCHAR(max)) + NCHAR(0)) COLLATE Latin1_General_100_BIN2) "
         f"= {VALUE}", ("POINT (1 2)",)),
        ("node", {"gt": ("/1/",)}, f"{EXACT} > {VALUE}", ("/1/",)),
        ("variant", {"eq": ("42",)},
         "((CAST(CAST({c} AS NVARCHAR(4000)) AS NVARCHAR(max)) + NCHAR(0)) "
         f"COLLATE Latin1_General_100_BIN2) = {VALUE}", ("42",)),
        ("tiny", {"between": (0, 255)}, "{c} >= ? AND {c} <= ?", (0, 255)),
        ("at_tz", {"lt": ("2024-01-01T01:00:00+01:00",)}, "{c} < ?", (datetime(2024, 1, 1),)),
    ],
)  # fmt: skip
def test_other_columns_compare_by_the_text_the_result_shows(
    name: str, condition: dict[str, tuple[Any, ...]], sql: str, params: tuple[Any, ...]
) -> None:
    assert where({name: condition}) == (sql.format(c=COLUMN[name]), params)


def _padded_order(a: str, b: str) -> int:
    """SQL Server's ``=``/``<`` on text under a binary collation: the shorter string padded
    with spaces, then UTF-16 code units compared."""
    width = max(len(a), len(b))
    x = a.ljust(width).encode("utf-16-be")
    y = b.ljust(width).encode("utf-16-be")
    return (x > y) - (x < y)


def _exact_order(a: str, b: str) -> int:
    x, y = a.encode("utf-16-be"), b.encode("utf-16-be")
    return (x > y) - (x < y)


def _appended_sentinel() -> str:
    """The character the statement appends to both sides of a text comparison."""
    sql, _ = where({"label": {"lt": ("b",)}})
    appended = re.findall(r"\+ NCHAR\((\d+)\)", sql)
    assert len(appended) == 2 and appended[0] == appended[1], sql
    return chr(int(appended[0]))


@given(
    st.text(st.characters(min_codepoint=1, max_codepoint=0xFFFF, exclude_categories=["Cs"])),
    st.text(st.characters(min_codepoint=1, max_codepoint=0xFFFF, exclude_categories=["Cs"])),
)
@example("a", "a ")
@example("a", "a\t")
@example("a ", "a\t")
@example("", "\x01")
def test_the_appended_sentinel_makes_padded_comparison_exact(a: str, b: str) -> None:
    sentinel = _appended_sentinel()
    assert _padded_order(a + sentinel, b + sentinel) == _exact_order(a, b)


def test_the_appended_sentinel_tells_trailing_spaces_and_tabs_apart() -> None:
    # Padded, "a" equals "a " and sorts after "a\t"; with the sentinel both come out exact.
    sentinel = _appended_sentinel()
    assert (_padded_order("a", "a "), _padded_order("a", "a\t")) == (0, 1)
    assert _padded_order("a" + sentinel, "a " + sentinel) == -1
    assert _padded_order("a" + sentinel, "a\t" + sentinel) == -1


@pytest.mark.parametrize(
    ("pattern", "escaped"),
    [
        ("a[b]c", "a\\[b]c"),
        ("[%]", "\\[%]"),
        ("a\\[b", "a\\[b"),
        ("a\\%", "a\\%"),
        ("end\\", "end\\"),
        ("plain", "plain"),
    ],
)
def test_brackets_in_like_are_plain_characters(pattern: str, escaped: str) -> None:
    assert escape_brackets(pattern) == escaped


@pytest.mark.parametrize(
    ("name", "condition", "fragment"),
    [
        ("tiny", {"eq": (256,)}, "operator 'eq' expects an integer"),
        ("tiny", {"eq": (-1,)}, "operator 'eq' expects an integer"),
        ("id", {"eq": (2**31,)}, "operator 'eq' expects an integer"),
        ("flag", {"eq": ("maybe",)}, "operator 'eq' expects a boolean"),
        ("ref", {"in": ("nope",)}, "operator 'in' expects a UUID"),
        ("at_tz", {"lt": ("soon",)}, "operator 'lt' expects an ISO 8601"),
        ("day", {"lt": ("31/01/2024",)}, "operator 'lt' expects a date"),
        ("amount", {"gt": ("1,5",)}, "operator 'gt' expects a decimal number"),
        ("id", {"between": (1,)}, "operator 'between' must have exactly 2 values, got 1"),
        ("id", {"gt": (1, 2)}, "operator 'gt' must have exactly 1 value, got 2"),
        ("label", {"like": (1,)}, "operator 'like' takes exactly 1 string pattern"),
        ("label", {"like": ("a\\",)}, "operator 'like' pattern must not end with the escape"),
    ],
)
def test_unconvertible_values_are_invalid_requests(
    name: str, condition: dict[str, tuple[Any, ...]], fragment: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        where({name: condition})
    assert caught.value.message.startswith(f"filter on 'Orders.{name}' of database 'sales': ")
    assert fragment in caught.value.message
