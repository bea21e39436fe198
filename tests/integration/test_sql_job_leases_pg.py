"""Leases on PostgreSQL: taken and renewed on the pooled connection's driver, each statement
on its own (no transaction around it), and a connection the server dropped is not reused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from sqlalchemy import event

from adapters.common.postgres import PostgresAddress
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.tables import create_engine_for
from domain.errors import Unavailable
from tests.integration.conftest import fresh_pg_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=20)


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    with fresh_pg_database("fetcher_leases_test") as url:
        yield url


@pytest.fixture
async def index(pg_database: str) -> AsyncIterator[SqlaJobIndex]:
    engine = create_engine_for(PostgresAddress.from_url(pg_database))
    index = SqlaJobIndex(engine)
    await index.create_schema()
    yield index
    await engine.dispose()


async def test_a_claims_lease_statements_run_without_a_transaction(index: SqlaJobIndex) -> None:
    engine = index._engine
    seen: list[str] = []

    def note(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(engine.sync_engine, "before_cursor_execute", note)
    event.listen(engine.sync_engine, "begin", lambda conn: seen.append("BEGIN"))
    job_id = uuid4()
    assert await index.take(job_id, 1, "w1", T0, T0 + LEASE)
    assert not await index.take(job_id, 2, "w2", T0, T0 + LEASE)
    assert await index.renew(job_id, 1, "w1", T0 + 2 * LEASE)
    await index.release(job_id, 1, "w1", T0)
    assert seen == []  # none went through SQLAlchemy's execution, none opened a transaction
    hold = await index.hold(job_id)
    assert hold is not None and (hold.attempt, hold.worker_id, hold.until) == (1, "w1", T0)


async def test_naive_times_are_taken_to_be_utc(index: SqlaJobIndex) -> None:
    job_id = uuid4()
    naive = T0.replace(tzinfo=None)
    assert await index.take(job_id, 1, "w1", naive, naive + LEASE)
    hold = await index.hold(job_id)
    assert hold is not None and hold.until == T0 + LEASE


async def test_a_dropped_connection_is_unavailable_once_then_replaced(
    index: SqlaJobIndex, pg_database: str
) -> None:
    job_id = uuid4()
    assert await index.take(job_id, 1, "w1", T0, T0 + LEASE)
    database = PostgresAddress.from_url(pg_database).database
    with psycopg.connect(pg_database.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )
    with pytest.raises(Unavailable):
        await index.renew(job_id, 1, "w1", T0 + 2 * LEASE)
    assert await index.renew(job_id, 1, "w1", T0 + 2 * LEASE)
