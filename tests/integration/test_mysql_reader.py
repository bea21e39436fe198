"""MySqlReader against the real MariaDB on loopback (a database of its own, dropped at the end)."""

from __future__ import annotations

import asyncio
import gc
import getpass
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import aiomysql
import pymysql
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from adapters.datasources.mysql.connection import tls_settings
from adapters.datasources.mysql.reader import MySqlReader
from application.errors import (
    DatasourceError,
    DatasourceQueryFailed,
    DatasourceUnavailable,
    InvalidSslMode,
)
from application.jobs.extraction_plan import ExtractionError, plan_datasource
from domain.connection import Connection, DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    MY_HOST,
    MY_PORT,
    assert_discovery_times_out,
    assert_stopping_early_closes_the_connection,
    endpoint_with,
    extract,
    extract_rows,
    my_admin,
    my_endpoint,
    parse,
    self_signed_certificate,
    sessions_settle,
    table_read,
)

DATABASE = unique_name("fetcher_my_reader")
USER = unique_name("fetcher_pw")
PASSWORD = "s3cr3t @:/?#&=+% ünï😀'\"\\"  # characters a DSN or latin-1 would mangle
HOSTILE = "O'Brien; DROP TABLE my_types; --"

# fmt: off
SETUP = [
    "SET SESSION sql_mode = '', time_zone = '+05:00'",
    """CREATE TABLE my_types (
        id BIGINT PRIMARY KEY, n INT, amount DECIMAL(18,2), label TEXT, code VARCHAR(20),
        active BOOL, day DATE, at_local DATETIME(6), at_ts TIMESTAMP(6) NULL, ref UUID,
        blob_ VARBINARY(16), doc JSON, ratio DOUBLE, f4 FLOAT, `Mixed Case` TEXT, `order` INT,
        tiny TINYINT, big BIGINT UNSIGNED, bits BIT(8), flag BIT(1), t TIME(3), y YEAR,
        mood ENUM('sad', 'happy'), tags SET('a', 'b'), geo POINT NULL)""",
    """INSERT INTO my_types VALUES
     (1, 10, 12.50, 'alpha', 'A-1', TRUE, '2024-01-15', '2024-01-15 10:30:00',
      '2024-01-15 15:30:00', '00000000-0000-0000-0000-000000000001', x'00ff',
      '{"k": [1, 2.5, "x"], "n": null}', 0.5, 1.1, 'Upper', 3, -128, 18446744073709551615,
      b'101', b'1', '13:14:15.5', 2024, 'happy', 'a,b', POINT(1, 2)),
     (2, 20, -0.01, 'beta', 'B_2', FALSE, '2024-01-31', '2024-01-31 23:59:59.5',
      '2024-02-01 04:59:59.999', '00000000-0000-0000-0000-000000000002', x'', '[]', 1e300,
      3.4028234e38, 'lower', 1, 0, 0, b'0', b'0', '-838:59:59', 1901, 'sad', '', NULL),
     (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
     (4, 40, 99999999999999.99, 'O''Brien; DROP TABLE my_types; --', 'ünï😀', 2, '2024-02-01',
      '2024-02-01 00:00:00', '2024-02-01 00:00:00', '00000000-0000-0000-0000-000000000004',
      x'41', '{"quote": "a\\\\"b <&>"}', 0.30000000000000004, 1.2345678, 'x', 2, 127, 1,
      b'11111111', b'1', '00:00:00', 2155, 'sad', 'b', NULL),
     (5, 50, 0, 'a%b_c', '100%', FALSE, '2023-12-31', '2023-12-31 12:00:00',
      '2023-12-31 17:00:00', '00000000-0000-0000-0000-000000000005', x'', '"s"', -2.5, 0,
      NULL, 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""",
    "CREATE TABLE my_big (id BIGINT PRIMARY KEY, label VARCHAR(20))",
    """INSERT INTO my_big
       SELECT n, CONCAT('row ', n) FROM (
         SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 1 AS n
         FROM (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
               UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
               UNION ALL SELECT 8 UNION ALL SELECT 9) a,
              (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
               UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
               UNION ALL SELECT 8 UNION ALL SELECT 9) b,
              (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
               UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
               UNION ALL SELECT 8 UNION ALL SELECT 9) c,
              (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
               UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
               UNION ALL SELECT 8 UNION ALL SELECT 9) e,
              (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2) f
       ) AS numbers WHERE n <= 25000""",
    "CREATE TABLE my_empty (id BIGINT)",
    "CREATE TABLE my_zero (d DATE, dt DATETIME)",
    "INSERT INTO my_zero VALUES ('0000-00-00', '0000-00-00 00:00:00'), ('2024-00-10', NULL)",
    "CREATE TABLE my_latin (id INT, l VARCHAR(20) CHARACTER SET latin1, KEY (l))",
    "INSERT INTO my_latin VALUES (1, 'abc'), (2, 'ABC'), (3, 'ü'), (4, 'abc ')",
    "CREATE TABLE `t'; DROP TABLE my_types; --` (`a``b` INT, `c;--` TEXT, `ü /* x */` TEXT,"
    " `50%s` TEXT)",
    "INSERT INTO `t'; DROP TABLE my_types; --` VALUES (1, 'x', 'y', '%s')",
    "CREATE VIEW my_view AS SELECT id FROM my_types",
]
# fmt: on


async def execute(statements: Sequence[str | tuple[str, tuple[Any, ...]]], database: str | None):
    connection = await my_admin(database)
    try:
        async with connection.cursor() as cursor:
            await cursor.execute("SET SESSION sql_notes = 0")
            for statement in statements:
                if isinstance(statement, tuple):
                    await cursor.execute(*statement)
                else:
                    await cursor.execute(statement)
    finally:
        connection.close()


async def _prepare() -> None:
    await execute([f"DROP DATABASE IF EXISTS `{DATABASE}`", f"CREATE DATABASE `{DATABASE}`"], None)
    users = [f"'{USER}'@'{host}'" for host in ("%", "localhost", "127.0.0.1")]
    try:
        await execute(SETUP, DATABASE)
        await execute(
            [f"DROP USER IF EXISTS {u}" for u in users]
            + [(f"CREATE USER {u.replace('%', '%%')} IDENTIFIED BY %s", (PASSWORD,)) for u in users]
            + [f"GRANT SELECT ON `{DATABASE}`.* TO {u}" for u in users],
            None,
        )
    except BaseException:
        await _drop()
        raise


async def _drop() -> None:
    users = [f"'{USER}'@'{host}'" for host in ("%", "localhost", "127.0.0.1")]
    await execute(
        [f"DROP DATABASE IF EXISTS `{DATABASE}`"] + [f"DROP USER IF EXISTS {u}" for u in users],
        None,
    )


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    try:
        asyncio.run(_prepare())
    except (OSError, pymysql.err.OperationalError) as error:
        pytest.fail(f"MariaDB is not reachable at {MY_HOST}:{MY_PORT} ({error})", pytrace=False)
    try:
        yield my_endpoint(DATABASE)
    finally:
        asyncio.run(_drop())


@pytest.fixture
def reader() -> MySqlReader:
    return MySqlReader()


async def read_table(
    reader: MySqlReader,
    endpoint: Endpoint,
    name: str,
    fields: Sequence[str] | None = None,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None,
) -> list[dict[str, Any]]:
    schema = await reader.discover(endpoint, [])
    return await extract_rows(reader, endpoint, table_read(schema, name, fields, filters))


async def ids(
    reader: MySqlReader,
    endpoint: Endpoint,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]],
    table: str = "my_types",
) -> list[int]:
    rows = await read_table(reader, endpoint, table, ["id"], filters)
    return sorted(row["id"] for row in rows)


# --- discovery -------------------------------------------------------------------------------


async def test_discover_lists_base_tables_with_lower_case_column_types_in_order(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["my_types"]
    assert (table.schema, table.name) == (None, "my_types")
    assert [(c.name, c.data_type) for c in table.columns] == [
        ("id", "bigint(20)"), ("n", "int(11)"), ("amount", "decimal(18,2)"), ("label", "text"),
        ("code", "varchar(20)"), ("active", "tinyint(1)"), ("day", "date"),
        ("at_local", "datetime(6)"), ("at_ts", "timestamp(6)"), ("ref", "uuid"),
        ("blob_", "varbinary(16)"), ("doc", "json"), ("ratio", "double"), ("f4", "float"),
        ("Mixed Case", "text"), ("order", "int(11)"), ("tiny", "tinyint(4)"),
        ("big", "bigint(20) unsigned"), ("bits", "bit(8)"), ("flag", "bit(1)"), ("t", "time(3)"),
        ("y", "year(4)"), ("mood", "enum"), ("tags", "set"), ("geo", "point"),
    ]  # fmt: skip
    assert schema.tables["my_empty"].columns == (Column("id", "bigint(20)"),)
    assert "t'; DROP TABLE my_types; --" in schema.tables


async def test_discover_leaves_out_views_and_ignores_the_scope(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, ["public", "other"])
    assert "my_view" not in schema.tables
    assert {"my_types", "my_big", "my_empty", "my_zero", "my_latin"} <= set(schema.tables)
    assert all("." not in name for name in schema.tables)


async def test_discover_of_a_system_database_is_empty(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    for system in ("mysql", "information_schema"):
        assert (
            await reader.discover(endpoint_with(endpoint, database_name=system), [])
        ).tables == {}


async def test_discover_unreachable_datasource_is_unavailable(endpoint: Endpoint) -> None:
    with pytest.raises(DatasourceError) as caught:
        await MySqlReader().discover(
            endpoint_with(endpoint, database_name="fetcher_no_such_db"), []
        )
    assert caught.value.stage == "connect"


async def test_discover_timeout_is_a_discovery_failure(endpoint: Endpoint) -> None:
    await assert_discovery_times_out(MySqlReader(discover_timeout=1e-6), endpoint)


# --- extraction: values ----------------------------------------------------------------------

EXPECTED: list[dict[str, Any]] = [
    {
        "id": 1, "n": 10, "amount": "12.50", "label": "alpha", "code": "A-1", "active": True,
        "day": "2024-01-15", "at_local": "2024-01-15T10:30:00Z",
        "at_ts": "2024-01-15T10:30:00Z", "ref": "00000000-0000-0000-0000-000000000001",
        "blob_": "AP8=", "doc": {"k": [1, 2.5, "x"], "n": None}, "ratio": 0.5, "f4": 1.1,
        "Mixed Case": "Upper", "order": 3, "tiny": -128, "big": 18446744073709551615, "bits": 5,
        "flag": True, "t": "13:14:15.500000", "y": 2024, "mood": "happy", "tags": "a,b",
        "geo": "POINT(1 2)",
    },
    {
        "id": 2, "n": 20, "amount": "-0.01", "label": "beta", "code": "B_2", "active": False,
        "day": "2024-01-31", "at_local": "2024-01-31T23:59:59.500000Z",
        "at_ts": "2024-01-31T23:59:59.999000Z", "ref": "00000000-0000-0000-0000-000000000002",
        "blob_": "", "doc": [], "ratio": 1e300, "f4": 3.4028235e38, "Mixed Case": "lower",
        "order": 1, "tiny": 0, "big": 0, "bits": 0, "flag": False, "t": "-838:59:59",
        "y": 1901, "mood": "sad", "tags": "", "geo": None,
    },
    {
        "id": 3, "n": None, "amount": None, "label": None, "code": None, "active": None,
        "day": None, "at_local": None, "at_ts": None, "ref": None, "blob_": None, "doc": None,
        "ratio": None, "f4": None, "Mixed Case": None, "order": None, "tiny": None, "big": None,
        "bits": None, "flag": None, "t": None, "y": None, "mood": None, "tags": None, "geo": None,
    },
    {
        "id": 4, "n": 40, "amount": "99999999999999.99", "label": HOSTILE, "code": "ünï😀",
        "active": True, "day": "2024-02-01", "at_local": "2024-02-01T00:00:00Z",
        "at_ts": "2024-01-31T19:00:00Z", "ref": "00000000-0000-0000-0000-000000000004",
        "blob_": "QQ==", "doc": {"quote": 'a"b <&>'}, "ratio": 0.30000000000000004,
        "f4": 1.2345678, "Mixed Case": "x", "order": 2, "tiny": 127, "big": 1, "bits": 255,
        "flag": True, "t": "00:00:00", "y": 2155, "mood": "sad", "tags": "b", "geo": None,
    },
    {
        "id": 5, "n": 50, "amount": "0.00", "label": "a%b_c", "code": "100%", "active": False,
        "day": "2023-12-31", "at_local": "2023-12-31T12:00:00Z",
        "at_ts": "2023-12-31T12:00:00Z", "ref": "00000000-0000-0000-0000-000000000005",
        "blob_": "", "doc": "s", "ratio": -2.5, "f4": 0.0, "Mixed Case": None, "order": 5,
        "tiny": None, "big": None, "bits": None, "flag": None, "t": None, "y": None,
        "mood": None, "tags": None, "geo": None,
    },
]  # fmt: skip


async def test_wildcard_extracts_every_column_with_exact_json_values(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    rows = await read_table(reader, endpoint, "my_types")
    assert sorted(rows, key=lambda row: row["id"]) == EXPECTED


async def test_row_objects_have_sorted_keys_and_json_is_copied_verbatim(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["my_types"]
    read = TableRead(result_key="my_types", table=table, columns=table.columns)
    [chunk] = [c async for c in extract(reader, endpoint, [read])]
    first = json.loads(b"[" + chunk.data + b"]", object_pairs_hook=lambda pairs: pairs)[0]
    keys = [key for key, _ in first]
    assert keys == sorted(keys)
    assert chunk.data.startswith(b'{"Mixed Case":"Upper","active":true,"amount":"12.50",')
    assert b'"doc":{"k": [1, 2.5, "x"], "n": null}' in chunk.data
    assert "ünï😀".encode() in chunk.data  # text as text, never base64


async def test_projection_returns_only_the_requested_columns(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    rows = await read_table(reader, endpoint, "my_types", ["order", "Mixed Case", "id"])
    assert sorted(rows, key=lambda row: row["id"]) == [
        {"id": e["id"], "order": e["order"], "Mixed Case": e["Mixed Case"]} for e in EXPECTED
    ]


async def test_zero_dates_come_out_as_null(reader: MySqlReader, endpoint: Endpoint) -> None:
    assert await read_table(reader, endpoint, "my_zero") == [
        {"d": None, "dt": None},
        {"d": None, "dt": None},
    ]


async def test_hostile_table_and_column_names_are_read_literally(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    name = "t'; DROP TABLE my_types; --"
    assert await read_table(reader, endpoint, name) == [
        {"a`b": 1, "c;--": "x", "ü /* x */": "y", "50%s": "%s"}
    ]
    found = await read_table(reader, endpoint, name, ["a`b"], {"c;--": {"eq": ("x",)}})
    assert found == [{"a`b": 1}]
    found = await read_table(reader, endpoint, name, ["50%s"], {"50%s": {"like": ("\\%s",)}})
    assert found == [{"50%s": "%s"}]
    assert await read_table(reader, endpoint, name, ["a`b"], {"ü /* x */": {"eq": ("z",)}}) == []
    assert len(await ids(reader, endpoint, {})) == 5


async def test_large_table_streams_in_chunks(reader: MySqlReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["my_big"]
    read = TableRead(result_key="my_big", table=table, columns=table.columns)
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert [c.rows for c in chunks] == [10_000, 10_000, 5_000]
    assert {c.result_key for c in chunks} == {"my_big"}
    rows = [row for chunk in chunks for row in parse(chunk)]
    assert [r["id"] for r in rows] == list(range(1, 25_001))
    assert rows[-1] == {"id": 25_000, "label": "row 25000"}
    assert gc.isenabled()


async def test_chunk_size_is_configurable(endpoint: Endpoint) -> None:
    reader = MySqlReader(chunk_rows=1_000)
    schema = await reader.discover(endpoint, [])
    table = schema.tables["my_big"]
    read = TableRead(result_key="my_big", table=table, columns=table.columns[:1])
    chunks = [c async for c in extract(reader, endpoint, [read])]
    assert [c.rows for c in chunks] == [1_000] * 25


async def test_empty_table_yields_no_chunks(reader: MySqlReader, endpoint: Endpoint) -> None:
    schema = await reader.discover(endpoint, [])
    table = schema.tables["my_empty"]
    read = TableRead(result_key="my_empty", table=table, columns=table.columns)
    assert [c async for c in extract(reader, endpoint, [read])] == []


async def test_several_tables_are_read_in_order_under_their_result_keys(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    reads = [
        TableRead(result_key=key, table=schema.tables[key], columns=schema.tables[key].columns)
        for key in ("my_latin", "my_empty", "my_types")
    ]
    chunks = [c async for c in extract(reader, endpoint, reads)]
    assert [(c.result_key, c.rows) for c in chunks] == [("my_latin", 4), ("my_types", 5)]


async def _open_sessions() -> int:
    connection = await my_admin()
    try:
        async with connection.cursor() as cursor:
            await cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                "WHERE DB = %s AND ID <> CONNECTION_ID()",
                (DATABASE,),
            )
            (count,) = await cursor.fetchone()
            return int(count)
    finally:
        connection.close()


async def _sessions_settle(expected: int) -> int:
    return await sessions_settle(_open_sessions, expected)


async def test_stopping_early_closes_the_connection(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    read = table_read(schema, "my_big")
    await assert_stopping_early_closes_the_connection(reader, endpoint, read, _open_sessions)


async def test_query_failure_is_datasource_query_failed(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    gone = Table(schema=None, name="my_no_such_table", columns=(Column("id", "bigint(20)"),))
    read = TableRead(result_key="my_no_such_table", table=gone, columns=gone.columns)
    with pytest.raises(DatasourceQueryFailed) as caught:
        [c async for c in extract(reader, endpoint, [read])]
    assert str(caught.value) == "failed to query datasource"
    assert isinstance(caught.value.__cause__, pymysql.err.ProgrammingError)
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
    ("between int", {"n": {"between": (15, 45)}}, [2, 4]),
    ("no match", {"n": {"between": (11, 19)}}, []),
    ("tinyint negative", {"tiny": {"lt": (0,)}}, [1]),
    ("unsigned bigint max", {"big": {"eq": (2**64 - 1,)}}, [1]),
    ("bit(8) as a number", {"bits": {"gte": (5,)}}, [1, 4]),
    ("year", {"y": {"in": (2024, "1901")}}, [1, 2]),
    ("gt numeric", {"amount": {"gt": ("12.49",)}}, [1, 4]),
    ("lte numeric float", {"amount": {"lte": (0,)}}, [2, 5]),
    ("between numeric", {"amount": {"between": ("-0.01", 12.5)}}, [1, 2, 5]),
    ("eq numeric exact", {"amount": {"eq": ("99999999999999.99",)}}, [4]),
    ("gt double", {"ratio": {"gt": (0.25,)}}, [1, 2, 4]),
    ("eq double exact", {"ratio": {"eq": (0.30000000000000004,)}}, [4]),
    ("eq float single precision", {"f4": {"eq": (1.1,)}}, [1]),
    ("in float", {"f4": {"in": (1.2345678, 0)}}, [4, 5]),
    ("eq bool", {"active": {"eq": (True,)}}, [1, 4]),
    ("eq bool string", {"active": {"eq": ("false",)}}, [2, 5]),
    ("ne bool", {"active": {"ne": (True,)}}, [2, 5]),
    ("eq bit(1)", {"flag": {"eq": (1,)}}, [1, 4]),
    ("eq date", {"day": {"eq": ("2024-01-31",)}}, [2]),
    ("lt date", {"day": {"lt": ("2024-01-15",)}}, [5]),
    ("between date", {"day": {"between": ("2024-01-15", "2024-01-31")}}, [1, 2]),
    ("gte timestamp", {"at_ts": {"gte": ("2024-01-31T19:00:00Z",)}}, [2, 4]),
    ("gt timestamp offset", {"at_ts": {"gt": ("2024-02-01T00:00:00+05:00",)}}, [2]),
    ("between timestamp end of day", {"at_ts": {"between": ("2024-01-01", "2024-01-31")}},
     [1, 2, 4]),
    ("between datetime end of day", {"at_local": {"between": ("2024-01-01", "2024-01-31")}},
     [1, 2]),
    ("between datetime exact", {"at_local": {"between": ("2024-01-01", "2024-01-31T12:00:00Z")}},
     [1]),
    ("lt datetime", {"at_local": {"lt": ("2024-01-15T10:30:00",)}}, [5]),
    ("eq time", {"t": {"eq": ("13:14:15.5",)}}, [1]),
    ("lt time", {"t": {"lt": ("00:00:01",)}}, [2, 4]),
    ("eq uuid", {"ref": {"eq": ("00000000-0000-0000-0000-000000000004",)}}, [4]),
    ("in uuid", {"ref": {"in": ("00000000-0000-0000-0000-000000000001",
                                "00000000-0000-0000-0000-000000000002")}}, [1, 2]),
    ("in text", {"code": {"in": ("A-1", "B_2")}}, [1, 2]),
    ("in with null", {"code": {"in": ("A-1", None)}}, [1, 3]),
    ("nin text", {"code": {"nin": ("A-1", "B_2")}}, [4, 5]),
    ("nin with null", {"code": {"nin": ("A-1", None)}}, [2, 4, 5]),
    ("in int", {"n": {"in": (20, 50)}}, [2, 5]),
    ("nin int", {"n": {"nin": (20, 50)}}, [1, 4]),
    ("eq text is case-sensitive", {"label": {"eq": ("ALPHA",)}}, []),
    ("eq text is not padded", {"code": {"eq": ("A-1 ",)}}, []),
    ("gt text by code point", {"label": {"gt": ("Z",)}}, [1, 2, 5]),
    ("lt text by code point", {"code": {"lt": ("a",)}}, [1, 2, 5]),
    ("eq enum", {"mood": {"eq": ("happy",)}}, [1]),
    ("eq set", {"tags": {"eq": ("a,b",)}}, [1]),
    ("like prefix", {"label": {"like": ("a%",)}}, [1, 5]),
    ("like is case-sensitive", {"label": {"like": ("A%",)}}, []),
    ("like single char", {"code": {"like": ("B_2",)}}, [2]),
    ("like single char is one character", {"code": {"like": ("_n_😀",)}}, [4]),
    ("like escaped wildcards", {"label": {"like": ("a\\%b\\_c",)}}, [5]),
    ("like escaped percent", {"code": {"like": ("100\\%",)}}, [5]),
    ("like hostile", {"label": {"like": ("%; DROP TABLE%",)}}, [4]),
    ("like on integer", {"n": {"like": ("1%",)}}, [1]),
    ("like on uuid", {"ref": {"like": ("%5",)}}, [5]),
    ("like on boolean", {"active": {"like": ("tr%",)}}, [1, 4]),
    ("like on boolean never matches null", {"active": {"like": ("f%",)}}, [2, 5]),
    ("eq json as text", {"doc": {"eq": ("[]",)}}, [2]),
    ("eq reserved word column", {"order": {"eq": (2,)}}, [4]),
    ("eq mixed case column", {"Mixed Case": {"eq": ("Upper",)}}, [1]),
    ("operators on a field AND-ed", {"n": {"gte": (10,), "lte": (40,), "ne": (20,)}}, [1, 4]),
    ("fields AND-ed", {"n": {"gt": (10,)}, "active": {"eq": (False,)}}, [2, 5]),
    ("hostile value matches literally", {"label": {"eq": (HOSTILE,)}}, [4]),
    ("hostile value matches nothing", {"label": {"eq": ("'; SELECT SLEEP(5); --",)}}, []),
    ("quote and backslash", {"code": {"eq": ("'\\\"",)}}, []),
    ("comment markers", {"label": {"in": ("/*", "*/ OR 1=1 -- ", "#")}}, []),
    ("very long value", {"label": {"eq": ("x" * 100_000,)}}, []),
    ("unicode", {"code": {"eq": ("ünï😀",)}}, [4]),
    ("empty arrays ignored", {"n": {"eq": ()}}, [1, 2, 3, 4, 5]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"),
    [pytest.param(f, e, id=name) for name, f, e in FILTER_CASES],
)
async def test_filters(
    reader: MySqlReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    assert await ids(reader, endpoint, filters) == expected


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"l": {"eq": ("abc",)}}, [1]),
        ({"l": {"in": ("ABC", "abc ")}}, [2, 4]),
        ({"l": {"eq": ("ü",)}}, [3]),
        ({"l": {"eq": ("a😀",)}}, []),  # not representable in latin1: no error, no match
        ({"l": {"like": ("_",)}}, [3]),
        ({"l": {"gt": ("abc",)}}, [3, 4]),
    ],
)
async def test_filters_on_a_latin1_column_are_exact(
    reader: MySqlReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    assert await ids(reader, endpoint, filters, table="my_latin") == expected


async def test_hostile_values_leave_the_table_intact(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    await ids(reader, endpoint, {"label": {"eq": ("x'); DROP TABLE my_types; --",)}})
    await ids(reader, endpoint, {"label": {"like": ("%'; DROP TABLE my_types; #",)}})
    assert len(await ids(reader, endpoint, {})) == 5


@pytest.mark.parametrize(
    ("filters", "fragment"),
    [
        ({"n": {"eq": ("abc",)}}, "operator 'eq' expects an integer for column type 'int(11)'"),
        ({"n": {"gt": (1.5,)}}, "operator 'gt' expects an integer"),
        ({"tiny": {"eq": (128,)}}, "operator 'eq' expects an integer"),
        ({"big": {"eq": (-1,)}}, "operator 'eq' expects an integer"),
        ({"ref": {"in": ("not-a-uuid",)}}, "operator 'in' expects a UUID"),
        ({"day": {"lt": ("31/01/2024",)}}, "operator 'lt' expects a date (YYYY-MM-DD)"),
        ({"at_ts": {"between": ("2024-01-01", "soon")}}, "operator 'between' expects an ISO 8601"),
        ({"active": {"eq": ("maybe",)}}, "operator 'eq' expects a boolean"),
        ({"amount": {"gte": ("1,50",)}}, "operator 'gte' expects a decimal number"),
        ({"f4": {"eq": (1e39,)}}, "operator 'eq' expects a number within single precision"),
        ({"n": {"gt": (None,)}}, "operator 'gt' does not accept null"),
        ({"label": {"like": ("abc\\",)}}, "must not end with the escape character"),
    ],
)
async def test_unconvertible_filter_values_are_invalid_requests(
    reader: MySqlReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    fragment: str,
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await ids(reader, endpoint, filters)
    assert caught.value.code == "FET-0401"
    field = next(iter(filters))
    assert caught.value.message.startswith(
        f"filter on 'my_types.{field}' of database '{DATABASE}': "
    )
    assert fragment in caught.value.message


async def test_invalid_filters_fail_before_connecting(endpoint: Endpoint) -> None:
    table = Table(schema=None, name="my_types", columns=(Column("n", "int(11)"),))
    read = TableRead(
        result_key="my_types", table=table, columns=table.columns, filters={"n": {"eq": ("x",)}}
    )
    with pytest.raises(InvalidRequest):
        MySqlReader().prepare(endpoint_with(endpoint, port=1), [read])


# --- planning a job against MariaDB ----------------------------------------------------------


def _connection(endpoint: Endpoint) -> Connection:
    return Connection(
        id=uuid4(), product_name="shop", config_name="shop_db", type=DatabaseType.MYSQL,
        host=endpoint.host, port=endpoint.port, database_name=endpoint.database_name,
        user_name=endpoint.user_name, password=None,
    )  # fmt: skip


async def _plan(
    reader: MySqlReader,
    endpoint: Endpoint,
    tables: Mapping[str, Sequence[str]],
    filters: Mapping[str, Any],
) -> Any:
    return await plan_datasource(
        "shop_db", _connection(endpoint), endpoint, tables, filters, reader
    )


async def test_plan_keeps_filters_of_mapped_tables(reader: MySqlReader, endpoint: Endpoint) -> None:
    plan = await _plan(reader, endpoint, {"my_types": ["id"]}, {"my_types": {"n": {"gt": [10]}}})
    [read] = plan.reads
    assert read.filters == {"n": {"gt": (10,)}}


@pytest.mark.parametrize(
    ("tables", "filters", "message"),
    [
        (
            {"my_types": ["id"]},
            {"my_latin": {"l": {"eq": ["abc"]}}},
            "FET-0401 - filter on field 'l' (operator 'eq') of table 'my_latin' in datasource "
            "'shop_db': the table is not mapped (filters apply to the tables of mappedFields)",
        ),
        (
            {"my_types": ["id"]},
            {"ghost": {"x": {"eq": [1], "gt": [0]}}},
            "FET-0401 - filter on field 'x' (operator 'eq', 'gt') of table 'ghost' in datasource "
            "'shop_db': the table is not in the datasource (filters apply to the tables of "
            "mappedFields)",
        ),
        (
            {"my_types": ["id"]},
            {"my_types": {"ghost'; --": {"like": ["%"]}}},
            "FET-0401 - filter on field 'ghost'; --' (operator 'like') of table 'my_types' in "
            "datasource 'shop_db': the field is not a column of the table",
        ),
    ],
)
async def test_plan_rejects_filters_outside_the_mapped_schema(
    reader: MySqlReader,
    endpoint: Endpoint,
    tables: dict[str, list[str]],
    filters: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(ExtractionError) as caught:
        await _plan(reader, endpoint, tables, filters)
    assert caught.value.category == "validation"
    assert caught.value.message == (
        "engine extraction: engine: [validation] extraction request failed schema validation: "
        + message
    )


async def test_plan_rejects_an_unconvertible_value_naming_the_datasource(
    reader: MySqlReader, endpoint: Endpoint
) -> None:
    with pytest.raises(ExtractionError) as caught:
        await _plan(reader, endpoint, {"my_types": ["id"]}, {"my_types": {"n": {"gt": ["ten"]}}})
    assert caught.value.message == (
        "engine extraction: engine: [validation] invalid filter value: FET-0401 - in datasource "
        f"'shop_db', filter on 'my_types.n' of database '{DATABASE}': operator 'gt' expects an "
        "integer for column type 'int(11)', got 'ten'"
    )
    assert await _sessions_settle(0) == 0


# --- connection test and TLS -----------------------------------------------------------------


async def test_connection_test_succeeds(reader: MySqlReader, endpoint: Endpoint) -> None:
    await reader.test(endpoint, timeout=5)


async def test_any_password_works_as_it_is_passed_as_a_parameter(endpoint: Endpoint) -> None:
    user = endpoint_with(endpoint, user_name=USER, password=PASSWORD)
    await MySqlReader().test(user, timeout=5)
    assert await read_table(MySqlReader(), user, "my_empty") == []


async def test_wrong_password_fails_without_showing_it(endpoint: Endpoint) -> None:
    wrong = PASSWORD + "x"
    target = endpoint_with(endpoint, user_name=USER, password=wrong)
    with pytest.raises(DatasourceUnavailable) as caught:
        await MySqlReader().test(target, timeout=5)
    assert str(caught.value) == "failed to connect to datasource"
    assert caught.value.stage == "connect"
    driver_error = caught.value.__cause__
    assert isinstance(driver_error, pymysql.err.OperationalError)
    assert driver_error.args[0] == 1045  # access denied
    for text in (str(caught.value), repr(caught.value), str(driver_error), repr(target)):
        assert wrong not in text


@pytest.mark.parametrize(
    "change",
    [{"port": 1}, {"user_name": "fetcher_no_such_user"}, {"database_name": "fetcher_no_such_db"}],
)
async def test_connection_test_failures_are_unavailable(
    endpoint: Endpoint, change: dict[str, Any]
) -> None:
    with pytest.raises(DatasourceUnavailable) as caught:
        await MySqlReader().test(endpoint_with(endpoint, **change), timeout=5)
    assert str(caught.value) == "failed to connect to datasource"
    assert caught.value.__cause__ is not None


def _greeting(capabilities: int) -> bytes:
    """A MySQL protocol-10 handshake packet offering ``capabilities``."""
    payload = (
        b"\x0a" + b"5.7.99-fake\x00" + (7).to_bytes(4, "little") + b"abcdefgh\x00"
        + (capabilities & 0xFFFF).to_bytes(2, "little") + b"\x2d" + (2).to_bytes(2, "little")
        + (capabilities >> 16).to_bytes(2, "little") + bytes([21]) + b"\x00" * 10
        + b"ijklmnopqrst\x00" + b"mysql_native_password\x00"
    )  # fmt: skip
    return len(payload).to_bytes(3, "little") + b"\x00" + payload


class FakeServer:
    """Greets like a MySQL server without TLS (or, ``silent``, not at all) and records what the
    client sends after the greeting."""

    def __init__(self, *, silent: bool = False) -> None:
        self.silent = silent
        self.received: list[bytes] = []

    async def __aenter__(self) -> FakeServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if not self.silent:
                flags = pymysql.constants.CLIENT
                offered = (
                    flags.LONG_PASSWORD | flags.PROTOCOL_41 | flags.SECURE_CONNECTION
                    | flags.PLUGIN_AUTH | flags.CONNECT_WITH_DB
                )  # fmt: skip
                writer.write(_greeting(offered))
                await writer.drain()
            self.received.append(await reader.read())
        except ConnectionError:
            self.received.append(b"")
        finally:
            writer.close()


async def test_connection_test_times_out(endpoint: Endpoint) -> None:
    async with FakeServer(silent=True) as server:
        started = asyncio.get_running_loop().time()
        with pytest.raises(DatasourceUnavailable):
            await MySqlReader().test(endpoint_with(endpoint, port=server.port), timeout=0.5)
        assert asyncio.get_running_loop().time() - started < 3


@pytest.mark.parametrize("mode", ["true", "skip-verify"])
async def test_required_tls_sends_no_credentials_to_a_server_without_tls(
    endpoint: Endpoint, mode: str
) -> None:
    async with FakeServer() as server:
        target = endpoint_with(endpoint, port=server.port, user_name=USER, ssl_mode=mode)
        with pytest.raises(DatasourceUnavailable):
            await MySqlReader().test(target, timeout=2)
        for _ in range(20):
            if server.received:
                break
            await asyncio.sleep(0.05)
    assert server.received == [b""]


async def test_plain_connection_does_send_the_handshake_response(endpoint: Endpoint) -> None:
    # The fake server's counterpart to the test above: without TLS the client answers.
    async with FakeServer() as server:
        target = endpoint_with(endpoint, port=server.port, user_name=USER)
        with pytest.raises(DatasourceUnavailable):
            await MySqlReader().test(target, timeout=0.5)
        for _ in range(20):
            if server.received:
                break
            await asyncio.sleep(0.05)
    assert USER.encode() in server.received[0]


async def test_preferred_falls_back_to_plain_and_true_refuses_it(endpoint: Endpoint) -> None:
    # The local server has TLS off: "preferred" connects without it, "true" must not.
    await MySqlReader().test(endpoint_with(endpoint, ssl_mode="preferred"), 5)
    for mode in ("true", "skip-verify"):
        with pytest.raises(DatasourceUnavailable):
            await MySqlReader().test(endpoint_with(endpoint, ssl_mode=mode), 5)


@pytest.mark.parametrize("mode", ["", "false"])
def test_tls_off_modes(endpoint: Endpoint, mode: str) -> None:
    assert tls_settings(endpoint_with(endpoint, ssl_mode=mode)) == (None, False)


def test_tls_true_verifies_against_the_given_ca(endpoint: Endpoint) -> None:
    ca, _ = self_signed_certificate()
    context, required = tls_settings(endpoint_with(endpoint, ssl_mode="true", ssl_ca=ca))
    assert required
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "fetcher-test"),),)]


def test_tls_true_without_ca_uses_the_system_trust_store(endpoint: Endpoint) -> None:
    context, required = tls_settings(endpoint_with(endpoint, ssl_mode="true"))
    assert required and context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(("mode", "required"), [("skip-verify", True), ("preferred", False)])
def test_tls_without_verification(endpoint: Endpoint, mode: str, required: bool) -> None:
    context, is_required = tls_settings(endpoint_with(endpoint, ssl_mode=mode))
    assert is_required is required
    assert context is not None
    assert context.verify_mode == ssl.CERT_NONE
    assert not context.check_hostname
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_tls_client_certificate_is_loaded_and_no_file_is_left(endpoint: Endpoint) -> None:
    cert, key = self_signed_certificate()
    before = set(Path(tempfile.gettempdir()).glob("fetcher-tls-*"))
    context, _ = tls_settings(
        endpoint_with(endpoint, ssl_mode="skip-verify", ssl_cert=cert, ssl_key=key)
    )
    assert context is not None
    assert set(Path(tempfile.gettempdir()).glob("fetcher-tls-*")) == before


@pytest.mark.parametrize("mode", ["TRUE", "require", "disable"])
def test_tls_unknown_mode_is_rejected(endpoint: Endpoint, mode: str) -> None:
    with pytest.raises(InvalidSslMode):
        tls_settings(endpoint_with(endpoint, ssl_mode=mode))


# --- TLS against a private MariaDB started with a certificate --------------------------------


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem(item: Any) -> str:
    if isinstance(item, x509.Certificate):
        return item.public_bytes(serialization.Encoding.PEM).decode()
    return item.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _issue(
    subject: str, key: Any, issuer: tuple[str, Any] | None, names: Sequence[x509.GeneralName] = ()
) -> x509.Certificate:
    issuer_name, issuer_key = issuer or (subject, key)
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


RENAMED_HOST = "db.test.invalid"
# X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
NAME_MISMATCH = (62, 64)


@dataclass(frozen=True)
class TlsServer:
    port: int
    ca: str
    client_cert: str
    client_key: str
    folder: Path
    server_pem: tuple[str, str]
    renamed_pem: tuple[str, str]
    """(certificate, key) from the test CA for ``db.test.invalid`` only."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    """A MariaDB of this test's own (its process, its folder) with TLS on; ``fetcher`` may only
    log in over TLS with a client certificate signed by the test CA."""
    # PATH first; a PATH without the sbin folders is common for users other than root.
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    install = shutil.which("mariadb-install-db", path=search)
    daemon = shutil.which("mariadbd", path=search)
    if install is None or daemon is None:
        pytest.skip("mariadb-install-db and mariadbd are needed to run a private TLS server")
    folder = tmp_path_factory.mktemp("tls-mariadb")
    ca_key, server_key, client_key = _key(), _key(), _key()
    ca = _issue("fetcher-test-ca", ca_key, None)
    server = _issue(
        "localhost", server_key, ("fetcher-test-ca", ca_key),
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )  # fmt: skip
    client = _issue("fetcher", client_key, ("fetcher-test-ca", ca_key))
    renamed_key = _key()
    renamed = _issue(
        RENAMED_HOST, renamed_key, ("fetcher-test-ca", ca_key), [x509.DNSName(RENAMED_HOST)]
    )
    for name, item in [("ca.pem", ca), ("server.pem", server), ("server-key.pem", server_key)]:
        (folder / name).write_text(_pem(item))
    user = f"--user={getpass.getuser()}"
    data = folder / "data"
    subprocess.run(
        [install, "--no-defaults", user, f"--datadir={data}",
         "--auth-root-authentication-method=normal"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    port = _free_port()
    process = subprocess.Popen(
        [daemon, "--no-defaults", user, f"--datadir={data}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={folder / 'mysqld.sock'}",
         f"--pid-file={folder / 'mysqld.pid'}", f"--log-error={folder / 'error.log'}",
         f"--ssl-ca={folder / 'ca.pem'}", f"--ssl-cert={folder / 'server.pem'}",
         f"--ssl-key={folder / 'server-key.pem'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        async def configure() -> None:
            for _ in range(150):
                try:
                    connection = await aiomysql.connect(host="127.0.0.1", port=port, user="root")
                    break
                except pymysql.err.OperationalError:
                    if process.poll() is not None:
                        raise
                    await asyncio.sleep(0.1)
            else:
                raise TimeoutError("the private MariaDB did not start within 15 s")
            try:
                async with connection.cursor() as cursor:
                    for statement in [
                        "DELETE FROM mysql.global_priv WHERE User = ''",
                        "FLUSH PRIVILEGES",
                        "CREATE DATABASE tls_db",
                        "CREATE TABLE tls_db.t (s TEXT)",
                        "INSERT INTO tls_db.t VALUES ('ünï')",
                    ]:
                        await cursor.execute(statement)
                    await cursor.execute(
                        "CREATE USER 'fetcher'@'%%' IDENTIFIED BY %s REQUIRE X509", (PASSWORD,)
                    )
                    await cursor.execute("GRANT SELECT ON tls_db.* TO 'fetcher'@'%'")
            finally:
                connection.close()

        asyncio.run(configure())
        yield TlsServer(
            port, _pem(ca), _pem(client), _pem(client_key), folder,
            (_pem(server), _pem(server_key)), (_pem(renamed), _pem(renamed_key)),
        )  # fmt: skip
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _serve_certificate(server: TlsServer, pem: tuple[str, str]) -> None:
    """Swaps the private server's certificate and key and reloads them (``FLUSH SSL``)."""
    (server.folder / "server.pem").write_text(pem[0])
    (server.folder / "server-key.pem").write_text(pem[1])
    connection = await aiomysql.connect(host="127.0.0.1", port=server.port, user="root")
    try:
        async with connection.cursor() as cursor:
            await cursor.execute("FLUSH SSL")
    finally:
        connection.close()


@pytest.fixture
async def renamed_tls_server(tls_server: TlsServer) -> AsyncIterator[TlsServer]:
    """The same server, presenting a certificate from the same CA for another name."""
    await _serve_certificate(tls_server, tls_server.renamed_pem)
    try:
        yield tls_server
    finally:
        await _serve_certificate(tls_server, tls_server.server_pem)


def _tls_endpoint(server: TlsServer, mode: str, **change: Any) -> Endpoint:
    fields = {
        "type": DatabaseType.MYSQL, "host": "127.0.0.1", "port": server.port,
        "database_name": "tls_db", "user_name": "fetcher", "password": PASSWORD,
        "ssl_mode": mode, "ssl_cert": server.client_cert, "ssl_key": server.client_key,
    }  # fmt: skip
    return Endpoint(**{**fields, **change})


@pytest.mark.parametrize(
    ("mode", "change"),
    [
        ("true", {"ssl_ca": "ca"}),
        ("true", {"ssl_ca": "ca", "host": "localhost"}),
        ("skip-verify", {}),
        ("preferred", {}),
    ],
)
async def test_tls_modes_reach_a_server_that_requires_tls_and_a_client_certificate(
    tls_server: TlsServer, mode: str, change: dict[str, Any]
) -> None:
    if change.get("ssl_ca") == "ca":
        change = {**change, "ssl_ca": tls_server.ca}
    endpoint = _tls_endpoint(tls_server, mode, **change)
    reader = MySqlReader()
    await reader.test(endpoint, timeout=5)
    assert await read_table(reader, endpoint, "t") == [{"s": "ünï"}]


@pytest.mark.parametrize(
    ("mode", "change", "cause"),
    [
        ("true", {}, ssl.SSLCertVerificationError),  # the test CA is not in the system store
        ("false", {}, pymysql.err.OperationalError),  # the account requires TLS
        ("skip-verify", {"ssl_cert": None, "ssl_key": None}, pymysql.err.OperationalError),
    ],
)
async def test_tls_failures_are_unavailable(
    tls_server: TlsServer, mode: str, change: dict[str, Any], cause: type[BaseException]
) -> None:
    with pytest.raises(DatasourceUnavailable) as caught:
        await MySqlReader().test(_tls_endpoint(tls_server, mode, **change), timeout=5)
    chain: BaseException | None = caught.value
    causes = []
    while chain is not None:
        causes.append(chain)
        chain = chain.__cause__ or chain.__context__
    assert any(isinstance(error, cause) for error in causes), causes


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_true_refuses_a_certificate_for_another_name_that_skip_verify_accepts(
    renamed_tls_server: TlsServer, host: str
) -> None:
    server = renamed_tls_server
    verified = _tls_endpoint(server, "true", ssl_ca=server.ca, host=host)
    with pytest.raises(DatasourceUnavailable) as caught:
        await MySqlReader().test(verified, timeout=5)
    chain: BaseException | None = caught.value
    refusals = []
    while chain is not None:
        if isinstance(chain, ssl.SSLCertVerificationError):
            refusals.append(chain.verify_code)
        chain = chain.__cause__ or chain.__context__
    assert refusals and refusals[0] in NAME_MISMATCH, refusals
    unverified = _tls_endpoint(server, "skip-verify", host=host)
    reader = MySqlReader()
    await reader.test(unverified, timeout=5)
    assert await read_table(reader, unverified, "t") == [{"s": "ünï"}]
