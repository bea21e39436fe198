"""The job index contract on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from adapters.common.postgres import PostgresAddress
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.tables import create_engine_for
from application.ports.job_index import JobIndex
from tests.contracts.job_index import JobIndexContract
from tests.integration.conftest import fresh_pg_database


class TestSqliteJobIndex(JobIndexContract):
    @pytest.fixture
    async def index(self, tmp_path: Path) -> AsyncIterator[JobIndex]:
        engine = create_engine_for(tmp_path / "index.db")
        index = SqlaJobIndex(engine)
        await index.create_schema()
        await index.create_schema()
        yield index
        await engine.dispose()


@pytest.fixture(scope="module")
def pg_index_database() -> Iterator[str]:
    with fresh_pg_database("fetcher_index_test") as url:
        yield url


class TestPostgresJobIndex(JobIndexContract):
    @pytest.fixture
    async def index(self, pg_index_database: str, tmp_path: Path) -> AsyncIterator[JobIndex]:
        engine = create_engine_for(PostgresAddress.from_url(pg_index_database))
        index = SqlaJobIndex(engine)
        await index.create_schema()
        yield index
        from sqlalchemy import text

        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "TRUNCATE fetcher_job_index, fetcher_job_datasources, "
                    "fetcher_projection_positions, fetcher_job_progress, fetcher_job_leases"
                )
            )
        await engine.dispose()
