"""A process reaches its PostgreSQL database through one driver (asyncpg) and two bounded pools:
the event store's own, and one engine the service tables and the audit checkpoints share."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import asyncpg
import pytest

from adapters.eventstore import postgres_store
from adapters.sql.tables import POOL_OVERFLOW, POOL_SIZE
from application.connections.queries.list_connections import ListFilter
from domain.errors import EntityNotFound
from domain.tenant import SINGLE_TENANT
from entrypoints.composition import bootstrap
from entrypoints.roles import Role
from entrypoints.settings import Settings
from tests.integration.conftest import fresh_pg_database

MASTER_KEY = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture
def database_url() -> Iterator[str]:
    with fresh_pg_database("fetcher_one_pool") as url:
        yield url


async def _sessions(url: str, database: str) -> dict[str, int]:
    admin = await asyncpg.connect(url)
    try:
        rows = await admin.fetch(
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid() GROUP BY 1",
            database,
        )
    finally:
        await admin.close()
    return {row[0]: row[1] for row in rows}


async def test_the_tables_and_checkpoints_share_one_engine_beside_the_event_stores_pool(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings.from_env(
        {
            "FETCHER_DATABASE_URL": database_url,
            "APP_ENC_KEY": MASTER_KEY,
            "FETCHER_DATA_DIR": str(tmp_path),
        }
    )
    database = database_url.rsplit("/", 1)[1]
    async with bootstrap(settings, roles={Role.API}) as fetcher:
        assert fetcher.api is not None
        api = fetcher.api
        assert api.list_checkpoints is not None
        for _ in range(3):  # the event store, the connections table and the checkpoints
            with pytest.raises(EntityNotFound):
                await api.get_job(uuid4(), tenant=SINGLE_TENANT)
            await api.connections.list(ListFilter(), tenant=SINGLE_TENANT)
            assert await api.list_checkpoints() == []
        sessions = await _sessions(database_url, database)
        # Every session of this process to its database is asyncpg's, named "fetcher" (no
        # psycopg, no thread pool); one engine for the tables and checkpoints, one small pool
        # for the event store.
        assert set(sessions) == {"fetcher"}, sessions
        assert sessions["fetcher"] <= POOL_SIZE + POOL_OVERFLOW + postgres_store.POOL_SIZE
