"""MongoReader against the MongoDB-protocol server on loopback (SecantusDB, a database of its
own, dropped at the end).

SecantusDB is an emulator in beta. The tests keep to mainstream operators; each place that relies
on the server behaving like MongoDB is marked "fidelity:".
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import pytest
from bson import Binary, Decimal128, Int64, ObjectId
from pymongo import AsyncMongoClient

from adapters.datasources.mongodb.connection import client_options, new_client
from adapters.datasources.mongodb.reader import MongoReader
from adapters.datasources.mongodb.schema import sample_size
from application.errors import DatasourceError, DatasourceUnavailable, InvalidSslMode
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Schema, TableRead
from tests.integration.conftest import require_listening, unique_name
from tests.integration.reader_helpers import (
    extract,
    extract_rows,
    parse,
    self_signed_certificate,
    table_read,
)

URL = os.environ.get("FETCHER_TEST_MONGO_URL", "mongodb://127.0.0.1:27018")
DATABASE = unique_name("fetcher_mongo_test")
HOSTILE = "O'Brien; db.people.drop(); //"


def _oid(n: int) -> ObjectId:
    return ObjectId(f"65a{n:021x}")


PEOPLE: list[dict[str, Any]] = [
    {
        "_id": _oid(1), "n": 1, "name": "alpha", "age": 10, "score": 0.5,
        "balance": Decimal128("12.50"), "active": True,
        "born": datetime(2024, 1, 15, 10, 30, tzinfo=UTC), "code": "A-1",
        "tags": ["a", "b"], "address": {"city": "Lisbon", "geo": [1.5, 2]},
        "blob": Binary(b"\x00\xff"), "ref": UUID(int=1), "big": Int64(2**40),
        "owner": _oid(9),
    },
    {
        "_id": _oid(2), "n": 2, "name": "beta", "age": 20, "score": float("nan"),
        "balance": Decimal128("-0.01"), "active": False,
        "born": datetime(2024, 1, 31, 23, 59, 59, 999000, tzinfo=UTC), "code": "B_2",
        "tags": [], "address": {}, "blob": Binary(b""), "ref": UUID(int=2), "big": Int64(-1),
    },
    {"_id": _oid(3), "n": 3, "name": None},
    {
        "_id": _oid(4), "n": 4, "name": HOSTILE, "age": 40, "score": 1e300,
        "balance": Decimal128("99999999999999.99"), "active": True,
        "born": datetime(2024, 2, 1, tzinfo=timezone(timedelta(hours=5))), "code": "ünï😀",
        "tags": ["x y", '"q"'], "address": {"city": "a\"b <&>"}, "blob": Binary(b"A", 5),
        "ref": UUID(int=4), "big": Int64(4),
    },
    {
        "_id": _oid(5), "n": 5, "name": "a%b_c", "age": 50, "score": float("-inf"),
        "balance": Decimal128("0"), "active": False,
        "born": datetime(2023, 12, 31, 12, tzinfo=UTC), "code": "a.c(d)+",
        "tags": None, "address": None, "blob": None, "ref": UUID(int=5), "big": Int64(5),
    },
]  # fmt: skip


def _endpoint(**change: Any) -> Endpoint:
    parts = urlsplit(URL)
    fields: dict[str, Any] = {
        "type": DatabaseType.MONGODB,
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 27017,
        "database_name": DATABASE,
        "user_name": "",
        "password": "",
    }
    return Endpoint(**{**fields, **change})


async def _prepare() -> None:
    endpoint = _endpoint()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        host=endpoint.host, port=endpoint.port, uuidRepresentation="standard"
    )
    try:
        await client.drop_database(DATABASE)
        db = client[DATABASE]
        await db.people.insert_many(PEOPLE)
        await db.big.insert_many([{"_id": i, "label": f"row {i}"} for i in range(1, 25_001)])
        await db.create_collection("empty")
        await db.mixed.insert_many(
            [{"v": 1, "w": 1}, {"v": "one", "w": 2.5}, {"v": None, "w": Int64(3)}]
        )
    finally:
        await client.close()


async def _drop() -> None:
    endpoint = _endpoint()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(endpoint.host, endpoint.port)
    try:
        await client.drop_database(DATABASE)
    finally:
        await client.close()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    require_listening(URL, "the MongoDB test server")
    try:
        asyncio.run(_prepare())
        yield _endpoint()
    finally:
        asyncio.run(_drop())


@pytest.fixture
def reader() -> MongoReader:
    return MongoReader()


_SCHEMAS: dict[str, Schema] = {}


async def discovered(reader: MongoReader, endpoint: Endpoint) -> Schema:
    """The module's collections as discovered once (sampling "big" takes a while)."""
    if "schema" not in _SCHEMAS:
        _SCHEMAS["schema"] = await reader.discover(endpoint, [])
    return _SCHEMAS["schema"]


async def read(
    reader: MongoReader,
    endpoint: Endpoint,
    name: str,
    fields: Sequence[str] | None = None,
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] | None = None,
) -> list[dict[str, Any]]:
    schema = await discovered(reader, endpoint)
    return await extract_rows(reader, endpoint, table_read(schema, name, fields, filters))


async def ns(
    reader: MongoReader, endpoint: Endpoint, filters: Mapping[str, Mapping[str, tuple[Any, ...]]]
) -> list[int]:
    return sorted(row["n"] for row in await read(reader, endpoint, "people", ["n"], filters))


# --- connection -------------------------------------------------------------------------------


async def test_connection_test_pings(reader: MongoReader, endpoint: Endpoint) -> None:
    await reader.test(endpoint, timeout=5)


async def test_connection_test_to_a_closed_port_is_unavailable_within_the_timeout() -> None:
    started = asyncio.get_running_loop().time()
    with pytest.raises(DatasourceUnavailable) as caught:
        await MongoReader().test(_endpoint(port=1), timeout=0.5)
    assert asyncio.get_running_loop().time() - started < 3
    assert str(caught.value) == "failed to connect to datasource"
    assert caught.value.stage == "connect"


def test_credentials_are_client_arguments_never_a_uri() -> None:
    password = "p@ss:w/rd?#&=+% ünï"
    endpoint = _endpoint(
        user_name="us:er@x", password=password,
        options={"authSource": "crm", "directConnection": "true"},
    )  # fmt: skip
    options = client_options(endpoint, 5)
    assert options["host"] == endpoint.host
    assert (options["username"], options["password"]) == ("us:er@x", password)
    assert options["authSource"] == "crm"
    assert options["directConnection"] is True
    client = new_client(endpoint, 5)
    try:
        credentials = client.options.pool_options._credentials
        assert credentials is not None
        assert (credentials.username, credentials.password, credentials.source) == (
            "us:er@x", password, "crm",
        )  # fmt: skip
        assert password not in repr(client)
    finally:
        asyncio.run(client.close())
    assert password not in repr(endpoint)


def test_auth_source_defaults_to_admin_and_no_user_means_no_credentials() -> None:
    assert client_options(_endpoint(user_name="u", password="p"), 5)["authSource"] == "admin"
    assert (
        client_options(_endpoint(options={"authSource": ""}, user_name="u"), 5)["authSource"]
        == "admin"
    )
    anonymous = client_options(_endpoint(), 5)
    assert "username" not in anonymous and "password" not in anonymous
    assert anonymous["directConnection"] is False


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("", {}),
        ("disable", {}),
        ("false", {}),
        ("true", {"tls": True}),
        ("enable", {"tls": True}),
        ("insecure", {"tls": True, "tlsInsecure": True}),
    ],
)
def test_ssl_modes(mode: str, expected: dict[str, Any]) -> None:
    options = client_options(_endpoint(ssl_mode=mode), 5)
    assert {k: v for k, v in options.items() if k.startswith("tls")} == expected


def test_unknown_ssl_mode_is_rejected() -> None:
    with pytest.raises(InvalidSslMode):
        client_options(_endpoint(ssl_mode="TRUE"), 5)


def test_ca_and_client_certificate_are_used_and_no_file_is_left() -> None:
    cert, key = self_signed_certificate("fetcher-mongo-test")
    before = set(Path(tempfile.gettempdir()).glob("fetcher-tls-*"))
    client = new_client(_endpoint(ssl_mode="true", ssl_ca=cert, ssl_cert=cert, ssl_key=key), 5)
    try:
        context = client.options.pool_options._ssl_context
        assert context is not None
        assert [c["subject"] for c in context.get_ca_certs()] == [
            ((("commonName", "fetcher-mongo-test"),),)
        ]
        assert context.check_hostname
    finally:
        asyncio.run(client.close())
    assert set(Path(tempfile.gettempdir()).glob("fetcher-tls-*")) == before


async def test_tls_against_a_plain_server_fails_the_connection_test(endpoint: Endpoint) -> None:
    with pytest.raises(DatasourceUnavailable):
        await MongoReader().test(_endpoint(ssl_mode="insecure"), timeout=1)


def test_sample_sizes_follow_the_reference() -> None:
    sizes = [sample_size(n) for n in (0, 10, 1_000, 10_000, 10_001, 100_000, 100_001, 10**6)]
    assert sizes == [0, 10, 1_000, 1_000, 2_000, 2_000, 5_000, 5_000]
    assert sample_size(10**6 + 1) == 10_000


# --- discovery --------------------------------------------------------------------------------


async def test_discover_lists_collections_with_sampled_field_types(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    schema = await reader.discover(endpoint, [])
    assert set(schema.tables) == {"people", "big", "empty", "mixed"}
    people = schema.tables["people"]
    assert (people.schema, people.name) == (None, "people")
    assert [(c.name, c.data_type) for c in people.columns] == [
        ("_id", "objectId"), ("n", "int"), ("name", "string"), ("age", "int"),
        ("score", "double"), ("balance", "decimal"), ("active", "bool"), ("born", "date"),
        ("code", "string"), ("tags", "array"), ("address", "object"), ("blob", "binData"),
        ("ref", "uuid"), ("big", "long"), ("owner", "objectId"),
    ]  # fmt: skip
    assert [(c.name, c.data_type) for c in schema.tables["mixed"].columns] == [
        ("_id", "objectId"), ("v", "mixed"), ("w", "double"),
    ]  # fmt: skip
    assert schema.tables["empty"].columns == ()


async def test_discover_leaves_out_views_and_system_collections(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(endpoint.host, endpoint.port)
    try:
        db = client[DATABASE]
        # fidelity: views created with `create` + `viewOn`, listed with type "view".
        await db.create_collection("people_view", viewOn="people", pipeline=[])
        listed = {info["name"]: info.get("type") async for info in await db.list_collections()}
        assert listed["people_view"] == "view"
        schema = await reader.discover(endpoint, [])
    finally:
        await client[DATABASE].drop_collection("people_view")
        await client.close()
    assert "people_view" not in schema.tables
    assert not [name for name in schema.tables if name.startswith("system.")]


async def test_discover_of_an_unreachable_server_is_a_connect_failure() -> None:
    with pytest.raises(DatasourceError) as caught:
        await MongoReader(connect_timeout=0.3).discover(_endpoint(port=1), [])
    assert caught.value.stage in ("connect", "discover")


# --- extraction: values -----------------------------------------------------------------------

EXPECTED_FIRST = {
    "_id": "65a000000000000000000001", "active": True, "address": {"city": "Lisbon",
    "geo": [1.5, 2]}, "age": 10, "balance": "12.50", "big": 1099511627776, "blob": "AP8=",
    "born": "2024-01-15T10:30:00Z", "code": "A-1", "n": 1, "name": "alpha",
    "owner": "65a000000000000000000009", "ref": "00000000-0000-0000-0000-000000000001",
    "score": 0.5, "tags": ["a", "b"],
}  # fmt: skip


async def test_wildcard_returns_every_field_in_the_common_format(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    rows = await read(reader, endpoint, "people")
    by_n = {row["n"]: row for row in rows}
    assert by_n[1] == EXPECTED_FIRST
    assert by_n[2]["score"] == "NaN"
    assert by_n[2]["born"] == "2024-01-31T23:59:59.999000Z"
    assert by_n[2]["blob"] == ""
    assert by_n[2]["big"] == -1
    assert by_n[4]["born"] == "2024-01-31T19:00:00Z"  # stored in UTC
    assert by_n[4]["score"] == 1e300
    assert by_n[4]["blob"] == "QQ=="  # binary subtype 5 is plain base64 too
    assert by_n[4]["address"] == {"city": 'a"b <&>'}
    assert by_n[4]["name"] == HOSTILE
    assert by_n[5]["score"] == "-Infinity"
    assert by_n[3] == {**dict.fromkeys(EXPECTED_FIRST), "_id": "65a000000000000000000003", "n": 3}


async def test_row_objects_have_sorted_keys_and_every_requested_field(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    schema = await discovered(reader, endpoint)
    table = schema.tables["people"]
    columns = tuple(table.column(n) for n in ("owner", "name", "n"))
    plan = TableRead(result_key="people", table=table, columns=columns)  # type: ignore[arg-type]
    [chunk] = [c async for c in extract(reader, endpoint, [plan])]
    rows = json.loads(b"[" + chunk.data + b"]", object_pairs_hook=lambda pairs: pairs)
    assert all([k for k, _ in row] == ["n", "name", "owner"] for row in rows)
    assert chunk.data.startswith(b'{"n":1,"name":"alpha","owner":"65a000000000000000000009"}')


async def test_projection_leaves_out_id_unless_asked_for(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    rows = await read(reader, endpoint, "people", ["n", "code"])
    assert sorted(rows, key=lambda r: r["n"])[0] == {"n": 1, "code": "A-1"}
    with_id = await read(reader, endpoint, "people", ["_id", "n"])
    assert {"_id": "65a000000000000000000001", "n": 1} in with_id


async def test_wildcard_includes_fields_the_sample_did_not_see(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    schema = await discovered(reader, endpoint)
    table = schema.tables["mixed"]
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(endpoint.host, endpoint.port)
    try:
        await client[DATABASE].mixed.insert_one({"v": 9, "late": "x"})
        plan = TableRead(result_key="mixed", table=table, columns=table.columns)
        rows = [r for c in [c async for c in extract(reader, endpoint, [plan])] for r in parse(c)]
    finally:
        await client[DATABASE].mixed.delete_one({"late": "x"})
        await client.close()
    late = [row for row in rows if row.get("late") == "x"]
    assert len(late) == 1
    assert list(late[0]) == sorted(late[0]) == ["_id", "late", "v", "w"]
    assert late[0]["w"] is None
    assert [list(row) for row in rows if "late" not in row] == [["_id", "v", "w"]] * 3


async def test_documents_stream_in_batches_in_order(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    schema = await discovered(reader, endpoint)
    table = schema.tables["big"]
    plan = TableRead(result_key="big", table=table, columns=table.columns)
    chunks = [c async for c in extract(reader, endpoint, [plan])]
    assert [c.rows for c in chunks] == [10_000, 10_000, 5_000]
    rows = [row for chunk in chunks for row in parse(chunk)]
    # fidelity: a find without sort returns documents in insertion order.
    assert [r["_id"] for r in rows] == list(range(1, 25_001))
    assert gc.isenabled()
    small = [c.rows async for c in extract(MongoReader(chunk_rows=1_000), endpoint, [plan])]
    assert small == [1_000] * 25


async def test_empty_collection_yields_nothing_and_tables_keep_their_order(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    schema = await discovered(reader, endpoint)
    plans = [
        TableRead(result_key=name, table=schema.tables[name], columns=schema.tables[name].columns)
        for name in ("mixed", "empty", "people")
    ]
    chunks = [c async for c in extract(reader, endpoint, plans)]
    assert [(c.result_key, c.rows) for c in chunks] == [("mixed", 3), ("people", 5)]


async def test_stopping_early_is_clean(reader: MongoReader, endpoint: Endpoint) -> None:
    schema = await discovered(reader, endpoint)
    table = schema.tables["big"]
    stream = extract(reader, endpoint, [TableRead("big", table, table.columns)])
    first = await anext(stream)
    assert first.rows == 10_000
    await stream.aclose()  # type: ignore[attr-defined]
    assert gc.isenabled()


# --- extraction: filters ----------------------------------------------------------------------

OID1 = "65a000000000000000000001"
FILTER_CASES: list[tuple[str, dict[str, dict[str, tuple[Any, ...]]], list[int]]] = [
    ("eq int", {"age": {"eq": (10,)}}, [1]),
    ("eq int from string", {"age": {"eq": ("20",)}}, [2]),
    ("eq several is in", {"age": {"eq": (10, 40)}}, [1, 4]),
    ("eq null matches null and missing", {"age": {"eq": (None,)}}, [3]),
    ("eq null or value", {"age": {"eq": (None, 10)}}, [1, 3]),
    ("ne excludes null and missing", {"age": {"ne": (10,)}}, [2, 4, 5]),
    ("ne null", {"name": {"ne": (None,)}}, [1, 2, 4, 5]),
    ("ne several", {"age": {"ne": (10, 20)}}, [4, 5]),
    ("gt", {"age": {"gt": (20,)}}, [4, 5]),
    ("gte", {"age": {"gte": (20,)}}, [2, 4, 5]),
    ("lt", {"age": {"lt": (20,)}}, [1]),
    ("lte float", {"age": {"lte": (20.0,)}}, [1, 2]),
    ("gt fraction on int", {"age": {"gt": (19.5,)}}, [2, 4, 5]),
    ("long beyond int32", {"big": {"gt": (2**32,)}}, [1]),
    ("gt decimal", {"balance": {"gt": ("12.49",)}}, [1, 4]),
    ("lte decimal", {"balance": {"lte": (0,)}}, [2, 5]),
    ("between decimal", {"balance": {"between": ("-0.01", 12.5)}}, [1, 2, 5]),
    ("eq decimal exact", {"balance": {"eq": ("99999999999999.99",)}}, [4]),
    ("eq bool", {"active": {"eq": (True,)}}, [1, 4]),
    ("eq bool string", {"active": {"eq": ("false",)}}, [2, 5]),
    ("ne bool", {"active": {"ne": (True,)}}, [2, 5]),
    ("gte date", {"born": {"gte": ("2024-01-31T19:00:00Z",)}}, [2, 4]),
    ("gt date offset", {"born": {"gt": ("2024-02-01T00:00:00+05:00",)}}, [2]),
    ("lt date only", {"born": {"lt": ("2024-01-15",)}}, [5]),
    ("between dates end of day", {"born": {"between": ("2024-01-01", "2024-01-31")}}, [1, 2, 4]),
    ("between dates exact", {"born": {"between": ("2024-01-01", "2024-01-31T12:00:00Z")}}, [1]),
    ("eq object id", {"_id": {"eq": (OID1,)}}, [1]),
    ("in object id", {"_id": {"in": (OID1, "65a000000000000000000004")}}, [1, 4]),
    ("nin object id", {"_id": {"nin": (OID1,)}}, [2, 3, 4, 5]),
    ("eq uuid", {"ref": {"eq": ("00000000-0000-0000-0000-000000000004",)}}, [4]),
    ("in text", {"code": {"in": ("A-1", "B_2")}}, [1, 2]),
    ("in with null", {"code": {"in": ("A-1", None)}}, [1, 3]),
    ("nin text", {"code": {"nin": ("A-1", "B_2")}}, [4, 5]),
    ("nin with null", {"code": {"nin": ("A-1", None)}}, [2, 4, 5]),
    ("like prefix", {"name": {"like": ("a%",)}}, [1, 5]),
    ("like is case-sensitive", {"name": {"like": ("A%",)}}, []),
    ("like single char", {"code": {"like": ("B_2",)}}, [2]),
    ("like regex characters are literal", {"code": {"like": ("a.c(d)+",)}}, [5]),
    ("like dot is not a wildcard", {"code": {"like": ("a_c(d)+",)}}, [5]),
    ("like dot does not match other chars", {"code": {"like": ("A.1",)}}, []),
    ("like escaped wildcards", {"name": {"like": ("a\\%b\\_c",)}}, [5]),
    ("like hostile", {"name": {"like": ("%db.people.drop()%",)}}, [4]),
    ("like unicode", {"code": {"like": ("ün_😀",)}}, [4]),
    # fidelity: $expr with $toString and $regexMatch.
    ("like on an int field as text", {"age": {"like": ("1%",)}}, [1]),
    ("like on object ids as text", {"_id": {"like": ("%5",)}}, [5]),
    ("operators on a field AND-ed", {"age": {"gte": (10,), "lte": (40,), "ne": (20,)}}, [1, 4]),
    ("between does not overwrite gte", {"age": {"gte": (20,), "between": (10, 40)}}, [2, 4]),
    ("between does not overwrite lte", {"age": {"lte": (20,), "between": (10, 40)}}, [1, 2]),
    ("eq several and in both apply", {"age": {"eq": (10, 20, 40), "in": (20, 40, 50)}}, [2, 4]),
    ("single eq kept beside gt", {"age": {"eq": (10,), "gt": (15,)}}, []),
    ("ne several and nin both apply", {"age": {"ne": (10,), "nin": (20,)}}, [4, 5]),
    ("fields AND-ed", {"age": {"gt": (10,)}, "active": {"eq": (False,)}}, [2, 5]),
    ("hostile value matches literally", {"name": {"eq": (HOSTILE,)}}, [4]),
    ("operator-looking value is a value", {"name": {"eq": ("{'$ne': null}",)}}, []),
    ("empty arrays ignored", {"age": {"eq": ()}}, [1, 2, 3, 4, 5]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"), [pytest.param(f, e, id=name) for name, f, e in FILTER_CASES]
)
async def test_filters(
    reader: MongoReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    expected: list[int],
) -> None:
    assert await ns(reader, endpoint, filters) == expected


@pytest.mark.parametrize(
    ("filters", "fragment"),
    [
        ({"_id": {"eq": ("nope",)}}, "operator 'eq' expects an ObjectId"),
        ({"born": {"lt": ("31/01/2024",)}}, "operator 'lt' expects an ISO 8601"),
        ({"age": {"gt": ("ten",)}}, "operator 'gt' expects a number"),
        ({"balance": {"gte": ("1,50",)}}, "operator 'gte' expects a decimal number"),
        ({"active": {"eq": ("maybe",)}}, "operator 'eq' expects a boolean"),
        ({"age": {"between": (1, 2, 3)}}, "operator 'between' must have exactly 2 values, got 3"),
    ],
)
async def test_unconvertible_values_are_invalid_requests(
    reader: MongoReader,
    endpoint: Endpoint,
    filters: dict[str, dict[str, tuple[Any, ...]]],
    fragment: str,
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await ns(reader, endpoint, filters)
    field = next(iter(filters))
    assert caught.value.message.startswith(f"filter on 'people.{field}' of database '{DATABASE}': ")
    assert fragment in caught.value.message


async def test_invalid_filters_fail_before_connecting(
    reader: MongoReader, endpoint: Endpoint
) -> None:
    schema = await discovered(reader, endpoint)
    table = schema.tables["people"]
    plan = TableRead("people", table, table.columns, filters={"age": {"eq": ("x",)}})
    with pytest.raises(InvalidRequest):
        MongoReader().prepare(_endpoint(port=1), [plan])
