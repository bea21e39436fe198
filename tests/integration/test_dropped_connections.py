"""After the database ended the pooled sessions (a restart, a terminated backend), the next
read and the next idempotent write go through first time: the closed connections are
replaced at checkout, before a statement fails on them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import asyncpg
import pytest
from sqlalchemy import text

from adapters.common.postgres import PostgresAddress
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.tables import create_engine_for
from tests.integration.conftest import fresh_pg_database


@pytest.fixture
def database_url() -> Iterator[str]:
    with fresh_pg_database("fetcher_dropped") as url:
        yield url


async def _end_the_services_sessions(url: str) -> int:
    database = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(url)
    try:
        ended = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND application_name = 'fetcher' AND pid <> pg_backend_pid()",
            database,
        )
    finally:
        await admin.close()
    await asyncio.sleep(0.2)  # the closed sockets reach the pooled connections
    return int(ended)


async def test_a_read_and_an_idempotent_write_go_through_after_the_sessions_ended(
    database_url: str,
) -> None:
    engine = create_engine_for(PostgresAddress.from_url(database_url))
    index = SqlaJobIndex(engine)
    try:
        await index.create_schema()
        job_id, now = uuid4(), datetime.now(UTC)

        # Several pooled sessions, all idle in the pool afterwards.
        async def hold() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT pg_sleep(0.05)"))

        await asyncio.gather(*(hold() for _ in range(4)))
        assert await _end_the_services_sessions(database_url) >= 4

        assert await index.hold(job_id) is None  # a read
        assert await index.take(job_id, 1, "w", now, now + timedelta(seconds=20))
        assert await _end_the_services_sessions(database_url) >= 1
        # an idempotent write (renewing the same lease to the same time)
        assert await index.renew(job_id, 1, "w", now + timedelta(seconds=20))
    finally:
        await engine.dispose()
