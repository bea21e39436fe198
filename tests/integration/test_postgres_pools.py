"""PostgresReader keeps connections between jobs, per stored connection version and tenant, on the
real PostgreSQL (a database and a login role of their own, dropped at the end)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from adapters.datasources.postgres.reader import PostgresReader
from application.errors import DatasourceUnavailable
from domain.connection import ConnectionIdentity, Endpoint
from domain.tenant import SINGLE_TENANT, Tenant
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    extract_rows,
    pg_admin,
    pg_endpoint,
    pg_ident,
    recreate_pg_database,
    sessions_settle,
    table_read,
)

DATABASE = unique_name("fetcher_pool_test")
ROLE = unique_name("fetcher_pool_user")
PASSWORD = "first-secret"


@pytest.fixture(scope="module", autouse=True)
def database() -> Iterator[None]:
    asyncio.run(_create())
    try:
        yield
    finally:
        asyncio.run(_drop())


async def _create() -> None:
    await recreate_pg_database(DATABASE)
    admin = await pg_admin()
    try:
        await admin.execute(f"DROP ROLE IF EXISTS {pg_ident(ROLE)}")
        await admin.execute(f"CREATE ROLE {pg_ident(ROLE)} LOGIN PASSWORD '{PASSWORD}'")
    finally:
        await admin.close()
    conn = await pg_admin(DATABASE)
    try:
        await conn.execute("CREATE TABLE t (id integer PRIMARY KEY, label text)")
        await conn.execute("INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 10) g")
        await conn.execute(f"GRANT SELECT ON t TO {pg_ident(ROLE)}")
    finally:
        await conn.close()


async def _drop() -> None:
    admin = await pg_admin()
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {pg_ident(DATABASE)} WITH (FORCE)")
        await admin.execute(f"DROP ROLE IF EXISTS {pg_ident(ROLE)}")
    finally:
        await admin.close()


async def _sessions() -> list[int]:
    """Backend pids of the reader's sessions on the test database."""
    admin = await pg_admin()
    try:
        rows = await admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND usename = $2 "
            "AND application_name = 'fetcher' ORDER BY pid",
            DATABASE,
            ROLE,
        )
    finally:
        await admin.close()
    return [row["pid"] for row in rows]


async def _count() -> int:
    return len(await _sessions())


def _endpoint(
    *, version: int = 1, tenant: Tenant = SINGLE_TENANT, connection_id: uuid.UUID | None = None
) -> Endpoint:
    base = replace(pg_endpoint(DATABASE, PASSWORD), user_name=ROLE)
    ident = ConnectionIdentity(tenant, connection_id or CONNECTION_ID, version)
    return replace(base, identity=ident)


CONNECTION_ID = uuid.uuid4()


async def _job(reader: PostgresReader, endpoint: Endpoint) -> int:
    """What a job does: discover, then extract; the number of rows read."""
    schema = await reader.discover(endpoint, ["public"])
    key = next(k for k in schema.tables if k.endswith("t"))
    rows = await extract_rows(reader, endpoint, table_read(schema, key))
    return len(rows)


async def test_jobs_of_one_connection_version_reuse_one_session() -> None:
    reader = PostgresReader()
    try:
        endpoint = _endpoint()
        assert await _job(reader, endpoint) == 10
        first = await _sessions()
        assert len(first) == 1  # kept open after the job
        for _ in range(5):
            assert await _job(reader, endpoint) == 10
        assert await _sessions() == first  # the same backend served every job
    finally:
        await reader.aclose()
    assert await sessions_settle(_count, 0) == 0


async def test_a_new_connection_version_never_reuses_the_old_session() -> None:
    reader = PostgresReader()
    try:
        assert await _job(reader, _endpoint(version=1)) == 10
        old = await _sessions()
        assert len(old) == 1
        # Version 2 names a login that does not exist (the local server trusts any password, so
        # a wrong user stands in for a wrong password): the kept, authenticated session of
        # version 1 must not serve it.
        stale = replace(_endpoint(version=2), user_name="no_such_login")
        with pytest.raises(DatasourceUnavailable):
            await _job(reader, stale)
        assert await _job(reader, _endpoint(version=3)) == 10
        assert await sessions_settle(_count, 1) == 1  # version 1's session was closed
        assert (await _sessions()) != old  # and version 3 dialled its own
    finally:
        await reader.aclose()


async def test_tenants_never_share_a_session() -> None:
    reader = PostgresReader()
    try:
        one = _endpoint(tenant=Tenant("tenant-a"))
        two = _endpoint(tenant=Tenant("tenant-b"))  # same connection id, same version
        assert await _job(reader, one) == 10
        assert await _job(reader, two) == 10
        assert await _count() == 2
        assert len(reader.pools.keys) == 2
    finally:
        await reader.aclose()
    assert await sessions_settle(_count, 0) == 0


async def test_an_endpoint_without_identity_is_never_pooled() -> None:
    reader = PostgresReader()
    try:
        endpoint = replace(_endpoint(), identity=None)
        assert await _job(reader, endpoint) == 10
        assert await sessions_settle(_count, 0) == 0
        assert reader.pools.keys == frozenset()
    finally:
        await reader.aclose()


async def test_pool_size_bounds_the_sessions_and_zero_turns_pooling_off() -> None:
    reader = PostgresReader(pool_size=2)
    try:
        endpoint = _endpoint()
        results = await asyncio.gather(*(_job(reader, endpoint) for _ in range(8)))
        assert results == [10] * 8
        assert 1 <= await _count() <= 2
    finally:
        await reader.aclose()
    off = PostgresReader(pool_size=0)
    try:
        assert await _job(off, _endpoint()) == 10
        assert await sessions_settle(_count, 0) == 0
    finally:
        await off.aclose()


async def test_a_pool_unused_for_its_idle_time_is_closed() -> None:
    reader = PostgresReader(pool_idle_seconds=0.2)
    try:
        assert await _job(reader, _endpoint(connection_id=uuid.uuid4())) == 10
        await asyncio.sleep(0.5)
        # Any later use sweeps idle pools; asyncpg closes idle connections on its own too.
        assert await _job(reader, _endpoint(connection_id=uuid.uuid4())) == 10
        assert len(reader.pools.keys) == 1
    finally:
        await reader.aclose()
    assert await sessions_settle(_count, 0) == 0


async def test_a_pooled_session_goes_back_without_its_snapshot() -> None:
    reader = PostgresReader(pool_size=1)
    admin = await pg_admin(DATABASE)
    try:
        endpoint = _endpoint(connection_id=uuid.uuid4())
        assert await _job(reader, endpoint) == 10
        await admin.execute("INSERT INTO t VALUES (11, 'row 11')")
        assert await _job(reader, endpoint) == 11  # a new snapshot on the same session
    finally:
        await admin.execute("DELETE FROM t WHERE id = 11")
        await admin.close()
        await reader.aclose()


async def test_a_kept_session_the_server_closed_is_replaced_without_failing_the_job() -> None:
    reader = PostgresReader(pool_size=1)
    try:
        endpoint = _endpoint(connection_id=uuid.uuid4())
        schema = await reader.discover(endpoint, ["public"])
        read = table_read(schema, next(k for k in schema.tables if k.endswith("t")))
        assert len(await extract_rows(reader, endpoint, read)) == 10
        (pid,) = await _sessions()
        admin = await pg_admin()
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        assert await sessions_settle(_count, 0) == 0
        # No discovery first (as with a cached schema): the pool notices the closed session
        # and the extraction reads on a new one.
        assert len(await extract_rows(reader, endpoint, read)) == 10
        assert await _count() == 1
    finally:
        await reader.aclose()


async def test_a_pooled_session_goes_back_idle_without_a_reset_round_trip() -> None:
    """The reader ends its snapshot itself; the pool adds no reset statement (no RESET ALL):
    the session is idle, its last statement the reader's ROLLBACK, and asyncpg never warns of
    a transaction left open."""
    loop = asyncio.get_running_loop()
    warned: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: warned.append(context))
    reader = PostgresReader(pool_size=1)
    try:
        endpoint = _endpoint(connection_id=uuid.uuid4())
        assert await _job(reader, endpoint) == 10
        admin = await pg_admin()
        try:
            states = await admin.fetch(
                "SELECT state, query FROM pg_stat_activity WHERE datname = $1 AND usename = $2",
                DATABASE,
                ROLE,
            )
        finally:
            await admin.close()
        assert [(row["state"], row["query"]) for row in states] == [("idle", "ROLLBACK")]
        assert await _job(reader, endpoint) == 10
    finally:
        await reader.aclose()
        loop.set_exception_handler(previous)
    assert warned == []
