"""What the datasource reader integration tests share: the local PostgreSQL and MariaDB admin
connections and endpoints, copying an endpoint with changes, an engine registry of readers already
built, reading tables (``prepare`` then ``stream``) into parsed rows, waiting for sessions to
close, and a throw-away TLS certificate.

Each engine's differences (scope of discovery, SQL dialect, expected values) stay in its test file.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import aiomysql
import asyncpg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from adapters.datasources.registry import EngineRegistry
from application.errors import DatasourceError
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import DatabaseType, Endpoint
from domain.schema import Schema, TableRead

PG_HOST = os.environ.get("FETCHER_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("FETCHER_TEST_PG_PORT", "5432"))
MY_HOST = os.environ.get("FETCHER_TEST_MYSQL_HOST", "127.0.0.1")
MY_PORT = int(os.environ.get("FETCHER_TEST_MYSQL_PORT", "3306"))

Filters = Mapping[str, Mapping[str, tuple[Any, ...]]]


# --- the local PostgreSQL and MariaDB ----------------------------------------------------------


async def pg_admin(database: str = "postgres") -> asyncpg.Connection:
    """A superuser connection to the local PostgreSQL (trust authentication, no TLS)."""
    return await asyncpg.connect(
        host=PG_HOST, port=PG_PORT, user="postgres", database=database, ssl=False
    )


async def my_admin(database: str | None = None) -> aiomysql.Connection:
    """A root connection to the local MariaDB, in autocommit."""
    return await aiomysql.connect(
        host=MY_HOST, port=MY_PORT, user="root", password="", db=database, charset="utf8mb4",
        autocommit=True,
    )  # fmt: skip


def pg_endpoint(database: str, password: str = "unused") -> Endpoint:
    """The reader's view of ``database`` on the local PostgreSQL (the password is not checked)."""
    return Endpoint(
        type=DatabaseType.POSTGRESQL, host=PG_HOST, port=PG_PORT, database_name=database,
        user_name="postgres", password=password,
    )  # fmt: skip


def my_endpoint(database: str) -> Endpoint:
    """The reader's view of ``database`` on the local MariaDB, as root."""
    return Endpoint(
        type=DatabaseType.MYSQL, host=MY_HOST, port=MY_PORT, database_name=database,
        user_name="root", password="",
    )  # fmt: skip


def pg_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def my_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


async def recreate_pg_database(name: str) -> None:
    """Drops ``name`` on the local PostgreSQL if it is there (sessions and all), creates it
    empty."""
    admin = await pg_admin()
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {pg_ident(name)} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {pg_ident(name)}")
    finally:
        await admin.close()


async def recreate_my_database(cursor: aiomysql.Cursor, name: str) -> None:
    """On the MariaDB session of ``cursor``: drops ``name`` if it is there, creates it empty and
    makes it the session's database."""
    await cursor.execute("SET SESSION sql_notes = 0")
    await cursor.execute(f"DROP DATABASE IF EXISTS {my_ident(name)}")
    await cursor.execute(f"CREATE DATABASE {my_ident(name)}")
    await cursor.execute(f"USE {my_ident(name)}")


async def drop_databases(name: str) -> None:
    """Drops ``name`` on both the local PostgreSQL and the local MariaDB."""
    admin = await pg_admin()
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {pg_ident(name)} WITH (FORCE)")
    finally:
        await admin.close()
    my = await my_admin()
    try:
        async with my.cursor() as cursor:
            await cursor.execute(f"DROP DATABASE IF EXISTS {my_ident(name)}")
    finally:
        my.close()


# --- endpoints ---------------------------------------------------------------------------------


def endpoint_fields(endpoint: Endpoint) -> dict[str, Any]:
    return {name: getattr(endpoint, name) for name in Endpoint.__dataclass_fields__}


def endpoint_with(endpoint: Endpoint, **change: Any) -> Endpoint:
    """A copy of ``endpoint`` with the given fields changed."""
    return Endpoint(**{**endpoint_fields(endpoint), **change})


def registry_of(readers: Mapping[DatabaseType, DatasourceReader]) -> EngineRegistry:
    """A registry dispatching to readers that are already built."""
    return EngineRegistry({db_type: (lambda r=reader: r) for db_type, reader in readers.items()})


# --- reading: prepare, then stream -------------------------------------------------------------


def extract(
    reader: DatasourceReader, endpoint: Endpoint, reads: Sequence[TableRead]
) -> AsyncIterator[RowChunk]:
    """The chunks of ``reads``: prepared now (a bad filter value raises here), streamed when
    iterated."""
    return reader.stream(endpoint, reader.prepare(endpoint, reads))


def parse_rows(data: bytes) -> list[Any]:
    """Rows a reader emitted: JSON objects separated by commas, without the enclosing array."""
    return json.loads(b"[" + data + b"]")


def parse(chunk: RowChunk) -> list[dict[str, Any]]:
    """The rows of one chunk; their number must be the chunk's ``rows``."""
    rows = parse_rows(chunk.data)
    assert len(rows) == chunk.rows
    return rows


def table_read(
    schema: Schema, key: str, fields: Sequence[str] | None = None, filters: Filters | None = None
) -> TableRead:
    """A read of table ``key`` of ``schema`` under that key: every column, or ``fields``."""
    table = schema.tables[key]
    columns = table.columns if fields is None else tuple(table.column(f) for f in fields)
    return TableRead(result_key=key, table=table, columns=columns, filters=filters or {})  # type: ignore[arg-type]


async def extract_rows(
    reader: DatasourceReader, endpoint: Endpoint, read: TableRead
) -> list[dict[str, Any]]:
    """Every row ``read`` yields, parsed, in the order the reader emitted them."""
    chunks = [chunk async for chunk in extract(reader, endpoint, [read])]
    return [row for chunk in chunks for row in parse(chunk)]


# --- sessions ----------------------------------------------------------------------------------


async def sessions_settle(open_sessions: Callable[[], Awaitable[int]], expected: int) -> int:
    """The number of open sessions once it is at most ``expected``, or after 2.5 s of waiting."""
    for _ in range(50):
        count = await open_sessions()
        if count <= expected:
            return count
        await asyncio.sleep(0.05)
    return count


# --- scenarios the SQL readers share ----------------------------------------------------------


async def assert_stopping_early_closes_the_connection(
    reader: DatasourceReader,
    endpoint: Endpoint,
    read: TableRead,
    open_sessions: Callable[[], Awaitable[int]],
) -> None:
    """Reading the first 10,000-row chunk of ``read`` opens one session; closing the stream then
    closes it."""
    before = await sessions_settle(open_sessions, 0)
    stream = extract(reader, endpoint, [read])
    assert isinstance(stream, AsyncIterator)
    first = await anext(stream)
    assert first.rows == 10_000
    assert await open_sessions() == before + 1
    await stream.aclose()  # type: ignore[attr-defined]
    assert await sessions_settle(open_sessions, before) == before
    assert gc.isenabled()


async def assert_discovery_times_out(reader: DatasourceReader, endpoint: Endpoint) -> None:
    """``reader`` (made with a discovery timeout too short to meet) fails at the discover stage."""
    with pytest.raises(DatasourceError) as caught:
        await reader.discover(endpoint, [])
    assert caught.value.stage == "discover"
    assert str(caught.value) == "failed to discover datasource schema"
    assert isinstance(caught.value.__cause__, TimeoutError)


# --- TLS ---------------------------------------------------------------------------------------


def self_signed_certificate(common_name: str = "fetcher-test") -> tuple[str, str]:
    """A self-signed CA certificate valid from yesterday to tomorrow and its key, both PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem
