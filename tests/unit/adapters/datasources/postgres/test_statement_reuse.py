"""A read that comes again reuses its statement and row type instead of building them anew."""

from __future__ import annotations

import msgspec
import pytest

from adapters.datasources.common.encoding import row_builder
from adapters.datasources.postgres.reader import PostgresReader
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead

TABLE = Table("public", "orders", (Column("id", "bigint"), Column("at", "timestamptz")))


def endpoint(database: str = "sales") -> Endpoint:
    return Endpoint(
        type=DatabaseType.POSTGRESQL,
        host="db.example",
        port=5432,
        database_name=database,
        user_name="reader",
        password="secret",
    )


def read(**filters: dict[str, tuple[object, ...]]) -> TableRead:
    return TableRead("orders", TABLE, TABLE.columns, dict(filters))


def test_the_same_read_reuses_its_statement_and_another_one_does_not() -> None:
    reader = PostgresReader()
    first = reader.statement(endpoint(), read(id={"gte": (5,)}))
    again = reader.statement(endpoint(), read(id={"gte": (5,)}))
    assert first is not None and again is first

    other_value = reader.statement(endpoint(), read(id={"gte": (6,)}))
    other_database = reader.statement(endpoint("ledger"), read(id={"gte": (5,)}))
    assert other_value is not None and other_value.params == (6,)
    assert other_database is not first and other_database == first  # same text, built anew


def test_a_filter_value_that_cannot_be_a_key_is_checked_every_time() -> None:
    reader = PostgresReader()
    unhashable = read(id={"eq": ({"not": "a number"},)})  # a JSON object: no key, no cache
    for _ in range(2):
        with pytest.raises(InvalidRequest):
            reader.statement(endpoint(), unhashable)


def test_rows_of_the_same_columns_share_one_type_that_encodes_as_before() -> None:
    row = row_builder(["a", "b c"])
    assert row_builder(("a", "b c")) is row
    assert msgspec.json.encode(row(1, "x")) == b'{"a":1,"b c":"x"}'
    plain = row_builder(['q"uote'])
    assert msgspec.json.encode(plain("v")) == b'{"q\\"uote":"v"}'
