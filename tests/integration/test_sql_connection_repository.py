"""The connection repository contract on SQLite and PostgreSQL, and an unusable PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from sqlalchemy import column, select, text

from adapters.common.postgres import PostgresAddress
from adapters.sql.connection_repository import SqlaConnectionRepository
from adapters.sql.tables import create_engine_for
from domain.errors import Unavailable
from domain.tenant import SINGLE_TENANT
from tests.contracts.connection_repository import (
    SECRET_NAMES,
    ConnectionRepositoryContract,
    Repository,
    SecretsAtRest,
)
from tests.integration.conftest import fresh_pg_database
from tests.integration.connection_api import repository_from_url


@asynccontextmanager
async def _sql_secrets_at_rest(url: str | None, sqlite_path: Path) -> AsyncIterator[SecretsAtRest]:
    """Reads the secret columns of a row with a separate engine, deleted rows included."""
    engine = create_engine_for(PostgresAddress.from_url(url) if url else sqlite_path)
    columns = ", ".join(f"{n}_ciphertext, {n}_key_version" for n in SECRET_NAMES)

    async def read(connection_id: UUID) -> dict[str, object]:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    select(text(columns))
                    .select_from(text("fetcher_connections"))
                    .where(column("id") == connection_id)
                )
            ).one()
        pairs = zip(row[0::2], row[1::2], strict=True)
        return {
            name: None if pair == (None, None) else pair
            for name, pair in zip(SECRET_NAMES, pairs, strict=True)
        }

    try:
        yield read
    finally:
        await engine.dispose()


class TestSqliteConnectionRepository(ConnectionRepositoryContract):
    @pytest.fixture
    async def repo(self, tmp_path: Path) -> AsyncIterator[Repository]:
        repo = repository_from_url(None, tmp_path / "data" / "fetcher.db")
        await repo.create_schema()
        await repo.create_schema()  # idempotent
        yield repo
        await repo.close()

    @pytest.fixture
    async def secrets_at_rest(self, tmp_path: Path) -> AsyncIterator[SecretsAtRest]:
        async with _sql_secrets_at_rest(None, tmp_path / "data" / "fetcher.db") as read:
            yield read


@pytest.fixture(scope="module")
def pg_connections_database() -> Iterator[str]:
    with fresh_pg_database("fetcher_conn_test") as url:
        yield url


class TestPostgresConnectionRepository(ConnectionRepositoryContract):
    @pytest.mark.parametrize("database", ["127.0.0.1:1/fetcher", "127.0.0.1:5432/no_such_db"])
    async def test_unusable_database_raises_unavailable(
        self, database: str, tmp_path: Path
    ) -> None:
        repo = repository_from_url(f"postgresql://postgres@{database}", tmp_path)
        try:
            with pytest.raises(Unavailable):
                await repo.check()
            with pytest.raises(Unavailable):
                await repo.get(uuid4(), tenant=SINGLE_TENANT)
        finally:
            await repo.close()

    @pytest.fixture
    async def repo(self, pg_connections_database: str, tmp_path: Path) -> AsyncIterator[Repository]:
        engine = create_engine_for(PostgresAddress.from_url(pg_connections_database))
        repo = SqlaConnectionRepository(engine)
        await repo.create_schema()
        yield repo
        async with engine.begin() as conn:
            await conn.execute(text("TRUNCATE fetcher_connections"))
        await engine.dispose()

    @pytest.fixture
    async def secrets_at_rest(
        self, pg_connections_database: str, tmp_path: Path
    ) -> AsyncIterator[SecretsAtRest]:
        async with _sql_secrets_at_rest(pg_connections_database, tmp_path / "unused.db") as read:
            yield read
