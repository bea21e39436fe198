"""MySqlReader keeps connections between jobs, per stored connection version and tenant, on the
real MariaDB (a database of its own, dropped at the end)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest

from adapters.datasources.mysql.reader import MySqlReader
from application.errors import DatasourceUnavailable
from domain.connection import ConnectionIdentity, Endpoint
from domain.tenant import SINGLE_TENANT, Tenant
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    extract,
    extract_rows,
    my_admin,
    my_endpoint,
    my_ident,
    recreate_my_database,
    sessions_settle,
    table_read,
)

DATABASE = unique_name("fetcher_mypool_test")
CONNECTION_ID = uuid.uuid4()


@pytest.fixture(scope="module", autouse=True)
def database() -> Iterator[None]:
    async def create() -> None:
        admin = await my_admin()
        try:
            async with admin.cursor() as cursor:
                await recreate_my_database(cursor, DATABASE)
                await cursor.execute("CREATE TABLE t (id INT PRIMARY KEY, label TEXT)")
                await cursor.execute(
                    "INSERT INTO t SELECT seq, CONCAT('row ', seq) FROM seq_1_to_20000"
                )
        finally:
            admin.close()

    async def drop() -> None:
        admin = await my_admin()
        try:
            async with admin.cursor() as cursor:
                await cursor.execute(f"DROP DATABASE IF EXISTS {my_ident(DATABASE)}")
        finally:
            admin.close()

    asyncio.run(create())
    try:
        yield
    finally:
        asyncio.run(drop())


async def _sessions() -> list[int]:
    admin = await my_admin()
    try:
        async with admin.cursor() as cursor:
            await cursor.execute(
                "SELECT ID FROM information_schema.PROCESSLIST "
                "WHERE DB = %s AND ID <> CONNECTION_ID() ORDER BY ID",
                (DATABASE,),
            )
            return [row[0] for row in await cursor.fetchall()]
    finally:
        admin.close()


async def _count() -> int:
    return len(await _sessions())


def _endpoint(
    *, version: int = 1, tenant: Tenant = SINGLE_TENANT, connection_id: uuid.UUID | None = None
) -> Endpoint:
    ident = ConnectionIdentity(tenant, connection_id or CONNECTION_ID, version)
    return replace(my_endpoint(DATABASE), identity=ident)


async def _job(reader: MySqlReader, endpoint: Endpoint) -> int:
    schema = await reader.discover(endpoint, [])
    return len(await extract_rows(reader, endpoint, table_read(schema, "t")))


async def test_jobs_of_one_connection_version_reuse_one_session() -> None:
    reader = MySqlReader()
    try:
        assert await _job(reader, _endpoint()) == 20_000
        first = await _sessions()
        assert len(first) == 1
        for _ in range(3):
            assert await _job(reader, _endpoint()) == 20_000
        assert await _sessions() == first
    finally:
        await reader.aclose()
    assert await sessions_settle(_count, 0) == 0


async def test_versions_and_tenants_never_share_a_session() -> None:
    reader = MySqlReader()
    try:
        assert await _job(reader, _endpoint(version=1)) == 20_000
        old = await _sessions()
        stale = replace(_endpoint(version=2), password="wrong password")
        with pytest.raises(DatasourceUnavailable):
            await _job(reader, stale)
        assert await sessions_settle(_count, 0) == 0  # version 1's session was closed
        assert await _job(reader, _endpoint(version=3)) == 20_000
        assert await _sessions() != old
        assert await _job(reader, _endpoint(version=3, tenant=Tenant("other"))) == 20_000
        assert await _count() == 2
    finally:
        await reader.aclose()
    assert await sessions_settle(_count, 0) == 0


async def test_stopping_early_drops_the_pooled_session() -> None:
    reader = MySqlReader()
    try:
        endpoint = _endpoint(connection_id=uuid.uuid4())
        schema = await reader.discover(endpoint, [])
        stream = extract(reader, endpoint, [table_read(schema, "t")])
        assert isinstance(stream, AsyncIterator)
        first = await anext(stream)
        assert first.rows == 10_000
        await stream.aclose()  # type: ignore[attr-defined]
        assert await sessions_settle(_count, 0) == 0  # dropped, not returned half-read
        assert await _job(reader, endpoint) == 20_000  # a fresh session serves the next job
    finally:
        await reader.aclose()


async def test_a_kept_session_the_server_closed_is_replaced_without_failing_the_job() -> None:
    reader = MySqlReader()
    try:
        endpoint = _endpoint(connection_id=uuid.uuid4())
        schema = await reader.discover(endpoint, [])
        read = table_read(schema, "t")
        assert len(await extract_rows(reader, endpoint, read)) == 20_000
        (session,) = await _sessions()
        admin = await my_admin()
        try:
            async with admin.cursor() as cursor:
                await cursor.execute(f"KILL {int(session)}")
        finally:
            admin.close()
        assert await sessions_settle(_count, 0) == 0
        # No discovery first (as with a cached schema): the extraction meets the closed session.
        assert len(await extract_rows(reader, endpoint, read)) == 20_000
    finally:
        await reader.aclose()


async def test_discovery_on_a_kept_session_the_server_closed_succeeds() -> None:
    reader = MySqlReader()
    try:
        endpoint = _endpoint(connection_id=uuid.uuid4())
        assert "t" in (await reader.discover(endpoint, [])).tables
        (session,) = await _sessions()
        admin = await my_admin()
        try:
            async with admin.cursor() as cursor:
                await cursor.execute(f"KILL {int(session)}")
        finally:
            admin.close()
        assert await sessions_settle(_count, 0) == 0
        assert "t" in (await reader.discover(endpoint, [])).tables
    finally:
        await reader.aclose()
