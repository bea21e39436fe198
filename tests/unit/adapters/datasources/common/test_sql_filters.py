"""Filter operators compiled for PostgreSQL (``$n``) and MySQL (``%s``): SQL text, bound values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from pymysql.converters import escape_string
from sqlalchemy import and_, column, select, table
from sqlalchemy.dialects import mysql

from adapters.datasources.common.sql_filters import Kind, column_kind, filter_clauses
from adapters.datasources.mysql.statements import RULES as MY
from adapters.datasources.mysql.statements import to_mysql
from adapters.datasources.postgres.statements import RULES as PG
from adapters.datasources.postgres.statements import to_asyncpg
from domain.errors import InvalidRequest

T = table("t", column("f"), column("order"), column("Mixed Case"))


def compiled(
    data_type: str, condition: Mapping[str, Sequence[Any]], field: str = "f"
) -> tuple[str, tuple[Any, ...]]:
    clauses = filter_clauses(T.c[field], data_type, condition, where=f"'t.{field}'")
    sql, params = to_asyncpg(select(T.c[field]).where(and_(*clauses)))
    return sql.split("WHERE ", 1)[1], params


def rejects(data_type: str, condition: Mapping[str, Sequence[Any]]) -> str:
    with pytest.raises(InvalidRequest) as caught:
        compiled(data_type, condition)
    assert caught.value.code == "FET-0401"
    return caught.value.message


@pytest.mark.parametrize(
    ("op", "sql"),
    [("gt", "t.f > $1"), ("gte", "t.f >= $1"), ("lt", "t.f < $1"), ("lte", "t.f <= $1")],
)
def test_comparison_operators_bind_one_value(op: str, sql: str) -> None:
    assert compiled("integer", {op: (5,)}) == (sql, (5,))


def test_eq_with_one_value_is_equality() -> None:
    assert compiled("text", {"eq": ("a",)}) == ("t.f = $1", ("a",))


def test_eq_with_several_values_is_in() -> None:
    assert compiled("bigint", {"eq": (1, 2, 3)}) == ("t.f IN ($1, $2, $3)", (1, 2, 3))


def test_eq_null_is_is_null_and_mixed_null_is_or_ed() -> None:
    assert compiled("text", {"eq": (None,)}) == ("t.f IS NULL", ())
    assert compiled("text", {"eq": (None, "a")}) == ("t.f IS NULL OR t.f = $1", ("a",))


def test_ne_with_one_value_null_and_several_values() -> None:
    assert compiled("integer", {"ne": (1,)}) == ("t.f != $1", (1,))
    assert compiled("integer", {"ne": (None,)}) == ("t.f IS NOT NULL", ())
    assert compiled("integer", {"ne": (1, 2)}) == ("(t.f NOT IN ($1, $2))", (1, 2))
    assert compiled("integer", {"ne": (None, 1)}) == ("t.f IS NOT NULL AND t.f != $1", (1,))


def test_in_and_nin() -> None:
    assert compiled("text", {"in": ("a", "b")}) == ("t.f IN ($1, $2)", ("a", "b"))
    assert compiled("text", {"nin": ("a", "b")}) == ("(t.f NOT IN ($1, $2))", ("a", "b"))
    assert compiled("text", {"in": ("a", None)}) == ("t.f IS NULL OR t.f = $1", ("a",))
    assert compiled("text", {"nin": ("a", None, "b")}) == (
        "t.f IS NOT NULL AND (t.f NOT IN ($1, $2))",
        ("a", "b"),
    )


def test_between_is_inclusive() -> None:
    assert compiled("numeric", {"between": (1, "2.50")}) == (
        "t.f >= $1 AND t.f <= $2",
        (Decimal("1"), Decimal("2.50")),
    )


def test_between_date_only_upper_bound_on_timestamp_means_end_of_day() -> None:
    _, params = compiled("timestamp without time zone", {"between": ("2024-01-01", "2024-01-31")})
    assert params == (datetime(2024, 1, 1), datetime(2024, 1, 31, 23, 59, 59, 999999))
    _, params = compiled("timestamp with time zone", {"between": ("2024-01-01", "2024-01-31")})
    assert params == (
        datetime(2024, 1, 1, tzinfo=UTC),
        datetime(2024, 1, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )


def test_between_full_timestamp_upper_bound_is_kept() -> None:
    _, params = compiled(
        "timestamp with time zone", {"between": ("2024-01-01", "2024-01-31T10:00:00+02:00")}
    )
    assert params[1] == datetime(2024, 1, 31, 8, tzinfo=UTC)


def test_between_date_column_keeps_the_date() -> None:
    _, params = compiled("date", {"between": ("2024-01-01", "2024-01-31")})
    assert params == (date(2024, 1, 1), date(2024, 1, 31))


def test_like_binds_the_pattern_with_backslash_escape() -> None:
    assert compiled("text", {"like": ("a%_b",)}) == ("t.f LIKE $1 ESCAPE '\\'", ("a%_b",))


def test_like_on_a_non_text_column_compares_its_text() -> None:
    assert compiled("integer", {"like": ("12%",)}) == (
        "CAST(t.f AS VARCHAR) LIKE $1 ESCAPE '\\'",
        ("12%",),
    )


def test_several_operators_on_a_field_are_and_ed_in_reference_order() -> None:
    sql, params = compiled("integer", {"like": ("1%",), "ne": (7,), "gte": (1,), "eq": (1, 2)})
    # IN lists are expanded last, so their placeholders come after the others.
    assert sql == (
        "t.f IN ($4, $5) AND t.f >= $1 AND t.f != $2 AND CAST(t.f AS VARCHAR) LIKE $3 ESCAPE '\\'"
    )
    assert params == (1, 7, "1%", 1, 2)


def test_empty_value_lists_are_ignored() -> None:
    assert filter_clauses(T.c.f, "integer", {"eq": (), "gt": ()}, where="'t.f'") == []


def test_hostile_values_are_only_ever_bound() -> None:
    hostile = "x'; DROP TABLE t; -- \" ünï"
    sql, params = compiled("text", {"eq": (hostile,), "like": (hostile,)})
    assert sql == "t.f = $1 AND t.f LIKE $2 ESCAPE '\\'"
    assert params == (hostile, hostile)


def test_identifiers_are_quoted() -> None:
    clauses = filter_clauses(T.c["order"], "integer", {"eq": (1,)}, where="'t.order'")
    clauses += filter_clauses(T.c["Mixed Case"], "text", {"eq": ("a",)}, where="'t.Mixed Case'")
    sql, _ = to_asyncpg(select(T.c.f).where(and_(*clauses)))
    assert 't."order" = $1 AND t."Mixed Case" = $2' in sql


@pytest.mark.parametrize(
    ("data_type", "raw", "bound"),
    [
        ("integer", "42", 42),
        ("bigint", 9007199254740993, 9007199254740993),
        ("smallint", 3.0, 3),
        ("numeric", 0.1, Decimal("0.1")),
        ("numeric", "12345678901234567890.12", Decimal("12345678901234567890.12")),
        ("double precision", "1.5", 1.5),
        ("real", 2, 2.0),
        ("boolean", True, True),
        ("boolean", "FALSE", False),
        ("boolean", 1, True),
        ("date", "2024-02-29", date(2024, 2, 29)),
        ("timestamp without time zone", "2024-01-01T10:00:00Z", datetime(2024, 1, 1, 10)),
        ("timestamp without time zone", "2024-01-01 10:00:00+02:00", datetime(2024, 1, 1, 8)),
        ("timestamp with time zone", "2024-01-01T10:00:00", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("time without time zone", "10:11:12.5", time(10, 11, 12, 500000)),
        ("time with time zone", "10:11", time(10, 11, tzinfo=UTC)),
        (
            "uuid",
            "550E8400-E29B-41D4-A716-446655440000",
            UUID("550e8400-e29b-41d4-a716-446655440000"),
        ),
        ("text", "plain", "plain"),
        ("character varying", 12345, "12345"),
        ("text", 12.0, "12"),
        ("text", 1.5, "1.5"),
    ],
)
def test_values_are_converted_by_the_column_type(data_type: str, raw: Any, bound: Any) -> None:
    for op in ("eq", "gt"):
        sql, params = compiled(data_type, {op: (raw,)})
        assert sql.endswith("$1")
        assert params == (bound,)
        assert type(params[0]) is type(bound)


@pytest.mark.parametrize(
    ("data_type", "raw"),
    [
        ("integer", "abc"),
        ("integer", "1.5"),
        ("integer", 1.5),
        ("integer", True),
        ("integer", "٣"),
        ("integer", 2**31),
        ("smallint", -(2**15) - 1),
        ("bigint", 2**63),
        ("numeric", "1,5"),
        ("numeric", "NaN"),
        ("numeric", False),
        ("double precision", "fast"),
        ("boolean", "yes"),
        ("boolean", 2),
        ("date", "2024-02-30"),
        ("date", "01/02/2024"),
        ("date", 20240101),
        ("timestamp with time zone", "yesterday"),
        ("timestamp without time zone", "2024-13-01"),
        ("time without time zone", "10:00+02:00"),
        ("uuid", "not-a-uuid"),
        ("uuid", 5),
        ("text", True),
    ],
)
def test_unconvertible_values_are_invalid_requests(data_type: str, raw: Any) -> None:
    message = rejects(data_type, {"eq": (raw,)})
    assert message.startswith("filter on 't.f': operator 'eq' expects ")
    assert f"column type '{data_type}'" in message


def test_conversion_error_names_field_operator_and_value() -> None:
    message = rejects("integer", {"gt": ("abc",)})
    assert message == (
        "filter on 't.f': operator 'gt' expects an integer for column type 'integer', got 'abc'"
    )


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte", "between"])
def test_null_is_rejected_outside_eq_ne_in_nin(op: str) -> None:
    values = (None, "2024-01-01") if op == "between" else (None,)
    assert "does not accept null" in rejects("date", {op: values})


def test_value_counts_are_checked() -> None:
    assert "exactly 1 value, got 2" in rejects("integer", {"gt": (1, 2)})
    assert "exactly 2 values, got 3" in rejects("integer", {"between": (1, 2, 3)})
    assert "exactly 1 string pattern" in rejects("text", {"like": (5,)})
    assert "exactly 1 string pattern" in rejects("text", {"like": (None,)})


def test_unknown_operator_is_rejected() -> None:
    assert "unknown operator 'regex'" in rejects("text", {"regex": ("a",)})


def test_other_types_compare_as_text() -> None:
    assert column_kind("jsonb") is Kind.OTHER
    assert compiled("jsonb", {"eq": ('{"a": 1}',)}) == (
        "CAST(t.f AS VARCHAR) = $1",
        ('{"a": 1}',),
    )
    assert compiled("inet", {"eq": (None,)}) == ("t.f IS NULL", ())


@pytest.mark.parametrize(
    ("data_type", "kind"),
    [
        ("integer", Kind.INTEGER),
        ("int(11)", Kind.INTEGER),
        ("bigint unsigned", Kind.INTEGER),
        ("decimal(18,2)", Kind.NUMERIC),
        ("NUMBER", Kind.NUMERIC),
        ("character varying", Kind.TEXT),
        ("varchar(255)", Kind.TEXT),
        ("timestamp with time zone", Kind.TIMESTAMPTZ),
        ("datetime", Kind.TIMESTAMP),
        ("uniqueidentifier", Kind.UUID),
        ("_int4", Kind.OTHER),
    ],
)
def test_column_kinds_across_engines(data_type: str, kind: Kind) -> None:
    assert column_kind(data_type) is kind


def test_unsigned_integer_range() -> None:
    _, params = compiled("bigint unsigned", {"eq": (2**64 - 1,)})
    assert params == (2**64 - 1,)
    assert "expects an integer" in rejects("int unsigned", {"eq": (-1,)})


def test_clauses_are_dialect_neutral() -> None:
    clauses = filter_clauses(T.c.f, "text", {"eq": ("a", "b"), "like": ("x%",)}, where="'t.f'")
    statement = select(T.c.f).where(and_(*clauses))
    sql = str(
        statement.compile(dialect=mysql.dialect(), compile_kwargs={"render_postcompile": True})
    )
    assert "t.f IN (%s, %s) AND t.f LIKE %s ESCAPE '\\\\'" in sql


def test_like_pattern_ending_with_a_lone_escape_is_rejected() -> None:
    assert "must not end with the escape character" in rejects("text", {"like": ("abc\\",)})
    assert compiled("text", {"like": ("abc\\\\",)})[1] == ("abc\\\\",)


def test_text_that_no_engine_can_store_is_rejected() -> None:
    assert "valid Unicode" in rejects("text", {"eq": ("a\ud800",)})
    assert "valid Unicode" in rejects("text", {"like": ("%\udfff",)})


# --- PostgreSQL rules ----------------------------------------------------------------------------


def pg(
    data_type: str, condition: Mapping[str, Sequence[Any]], field: str = "f"
) -> tuple[str, tuple[Any, ...]]:
    clauses = filter_clauses(T.c[field], data_type, condition, where=f"'t.{field}'", rules=PG)
    sql, params = to_asyncpg(select(T.c[field]).where(and_(*clauses)))
    return sql.split("WHERE ", 1)[1], params


def test_postgres_orders_text_by_code_point() -> None:
    assert pg("text", {"gt": ("a",)}) == ('(t.f COLLATE "C") > $1', ("a",))
    assert pg("character varying", {"between": ("a", "b")}) == (
        '(t.f COLLATE "C") >= $1 AND (t.f COLLATE "C") <= $2',
        ("a", "b"),
    )
    assert pg("jsonb", {"lt": ("{",)}) == ('(CAST(t.f AS VARCHAR) COLLATE "C") < $1', ("{",))
    assert pg("integer", {"gt": (1,)}) == ("t.f > $1", (1,))


def test_postgres_text_equality_and_like_keep_the_column_for_its_indexes() -> None:
    assert pg("text", {"eq": ("a",), "like": ("a%",)}) == (
        "t.f = $1 AND t.f LIKE $2 ESCAPE '\\'",
        ("a", "a%"),
    )


def test_postgres_citext_compares_case_sensitively_as_text() -> None:
    assert pg("citext", {"eq": ("A",), "like": ("A%",)}) == (
        "CAST(t.f AS TEXT) = $1 AND CAST(t.f AS TEXT) LIKE $2 ESCAPE '\\'",
        ("A", "A%"),
    )


def test_postgres_rejects_text_with_nul() -> None:
    with pytest.raises(InvalidRequest) as caught:
        pg("text", {"eq": ("a\x00b",)})
    assert "expects a string without NUL characters for column type 'text'" in str(caught.value)


# --- MySQL / MariaDB rules -----------------------------------------------------------------------

BYTES = "CAST(CAST(t.{} AS CHAR CHARACTER SET utf8mb4) AS BINARY)"


def my(
    data_type: str, condition: Mapping[str, Sequence[Any]], field: str = "f"
) -> tuple[str, tuple[Any, ...]]:
    clauses = filter_clauses(T.c[field], data_type, condition, where=f"'t.{field}'", rules=MY)
    sql, params = to_mysql(select(T.c[field]).where(and_(*clauses)))
    return sql.split("WHERE ", 1)[1], params


@pytest.mark.parametrize(
    ("data_type", "kind"),
    [
        ("tinyint(1)", Kind.BOOLEAN),
        ("bit(1)", Kind.BOOLEAN),
        ("tinyint(4)", Kind.INTEGER),
        ("bit(8)", Kind.INTEGER),
        ("int(10) unsigned", Kind.INTEGER),
        ("year(4)", Kind.INTEGER),
        ("decimal(18,2)", Kind.NUMERIC),
        ("float", Kind.FLOAT),
        ("datetime(6)", Kind.TIMESTAMP),
        ("timestamp", Kind.TIMESTAMP),
        ("time(3)", Kind.TIME),
        ("varchar(20)", Kind.TEXT),
        ("enum", Kind.TEXT),
        ("uuid", Kind.UUID),
        ("json", Kind.OTHER),
        ("point", Kind.OTHER),
        ("varbinary(8)", Kind.OTHER),
    ],
)
def test_mysql_column_kinds(data_type: str, kind: Kind) -> None:
    assert MY.kind(data_type) is kind


def test_mysql_text_equality_is_exact_and_index_friendly_for_ascii() -> None:
    assert my("varchar(20)", {"eq": ("Ab",)}) == (
        f"t.f = %s AND {BYTES.format('f')} = %s",
        ("Ab", "Ab"),
    )
    assert my("text", {"in": ("a", "b")}) == (
        f"t.f IN (%s, %s) AND {BYTES.format('f')} IN (%s, %s)",
        ("a", "b", "a", "b"),
    )


def test_mysql_non_ascii_text_equality_compares_bytes_only() -> None:
    # A latin1 column compared with a value it cannot hold would be an "illegal mix of
    # collations"; comparing UTF-8 bytes cannot fail.
    assert my("varchar(20)", {"eq": ("ü😀",)}) == (f"{BYTES.format('f')} = %s", ("ü😀",))


def test_mysql_text_ne_and_ordering_compare_bytes() -> None:
    assert my("text", {"ne": ("a",), "gte": ("b",)}) == (
        f"{BYTES.format('f')} >= %s AND {BYTES.format('f')} != %s",
        ("b", "a"),
    )


def test_mysql_like_is_case_sensitive_under_utf8mb4_bin() -> None:
    assert my("varchar(20)", {"like": ("A\\_%",)}) == (
        "(CAST(t.f AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin) LIKE %s ESCAPE '\\\\'",
        ("A\\_%",),
    )
    sql, _ = my("int(11)", {"like": ("1%",)})
    assert sql.startswith("(CAST(t.f AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin) LIKE")


def test_mysql_boolean_compares_zero_or_not() -> None:
    assert my("tinyint(1)", {"eq": ("true",)}) == ("(t.f != %s) = %s", (0, True))
    sql, params = my("bit(1)", {"like": ("t%",)})
    assert "CASE WHEN (t.f != %s) THEN %s WHEN (t.f = %s) THEN %s END" in sql
    assert params == (0, "true", 0, "false", "t%")


def test_mysql_float_values_are_rounded_to_single_precision() -> None:
    assert my("float", {"eq": (1.1,)}) == ("t.f = %s", (1.100000023841858,))
    assert my("double", {"eq": (1.1,)}) == ("t.f = %s", (1.1,))
    assert "within single precision" in str(_rejected(lambda: my("float", {"eq": (1e39,)})))


def test_mysql_uuid_values_are_bound_as_text() -> None:
    assert my("uuid", {"eq": ("550E8400-E29B-41D4-A716-446655440000",)}) == (
        "t.f = %s",
        ("550e8400-e29b-41d4-a716-446655440000",),
    )


def test_mysql_identifiers_are_quoted_and_percent_signs_doubled() -> None:
    hostile = table("t`x", column("a`b; -- %s"), column("order"))
    clauses = filter_clauses(
        hostile.c["a`b; -- %s"], "int(11)", {"eq": (1,)}, where="'t.a'", rules=MY
    )
    clauses += filter_clauses(hostile.c["order"], "int(11)", {"gt": (2,)}, where="'t.o'", rules=MY)
    sql, params = to_mysql(select(hostile.c["order"]).where(and_(*clauses)))
    assert sql == (
        "SELECT `t``x`.`order` \nFROM `t``x` \n"
        "WHERE `t``x`.`a``b; -- %%s` = %s AND `t``x`.`order` > %s"
    )
    assert params == (1, 2)


def test_mysql_hostile_values_are_escaped_into_one_literal_by_the_driver() -> None:
    hostile = "x'; DROP TABLE t; -- \\' \" ünï"
    sql, params = my("text", {"eq": (hostile,), "like": (hostile + "%",)})
    literals = tuple("'" + escape_string(value) + "'" for value in params)
    final = sql % literals
    assert final.count("DROP TABLE") == len(params) == 2  # inside the literals only
    assert final.endswith(" ESCAPE '\\\\'")  # the backslash, escaped as MySQL reads it
    for literal_text in literals:
        assert literal_text in final


def _rejected(call: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call()
    return caught.value
