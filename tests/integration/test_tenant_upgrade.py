"""Data written before tenants existed: SQL tables created by the older version are upgraded in
place at start (SQLite and PostgreSQL), and ``JobRequested`` events recorded without a tenant
are read as the single tenant's."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from sqlalchemy import Index, MetaData, Table, insert, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.store import event_store_for
from adapters.sql.connection_repository import SqlaConnectionRepository
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.job_index import job_datasources as new_job_datasources
from adapters.sql.job_index import jobs as new_jobs
from adapters.sql.job_index import positions as new_positions
from adapters.sql.tables import connections, create_engine_for
from application.jobs.queries.get_job import GetJob, GetJobHistory
from application.jobs.repository import EventSourcedJobs
from domain.errors import Conflict, FetcherError
from domain.job import request_job
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT, Tenant
from tests.integration.conftest import fresh_pg_database

pytestmark = pytest.mark.integration

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
A = Tenant("tenant-a")
_LIVE = text("deleted_at IS NULL")


def _without_tenant(table: Table, metadata: MetaData, *indexes: Index) -> Table:
    columns = [column._copy() for column in table.columns if column.name != "tenant"]
    return Table(table.name, metadata, *columns, *indexes)


def _old_schema() -> tuple[MetaData, Table, Table, Table]:
    """The tables as the version before tenants created them."""
    metadata = MetaData()
    old_connections = _without_tenant(
        connections,
        metadata,
        Index(
            "uq_fetcher_connections_config_name_live",
            "config_name",
            unique=True,
            postgresql_where=_LIVE,
            sqlite_where=_LIVE,
        ),
        Index("ix_fetcher_connections_created_at", "created_at"),
    )
    old_jobs = _without_tenant(
        new_jobs, metadata, Index("ix_fetcher_job_index_status", "status", "created_at")
    )
    old_datasources = _without_tenant(
        new_job_datasources, metadata, Index("ix_fetcher_job_datasources_name", "config_name")
    )
    _without_tenant(new_positions, metadata)
    return metadata, old_connections, old_jobs, old_datasources


async def _fill_old_tables(engine: AsyncEngine) -> dict[str, Any]:
    metadata, old_connections, old_jobs, old_datasources = _old_schema()
    row: dict[str, Any] = {
        "id": uuid4(),
        "product_name": "payments",
        "config_name": "billing",
        "type": "POSTGRESQL",
        "host": "db.example.com",
        "port": 5432,
        "database_name": "billing",
        "schema": None,
        "user_name": "reader",
        "password_ciphertext": "c2VhbGVk",
        "password_key_version": "1",
        "metadata": {},
        "created_at": T0,
        "updated_at": T0,
        "version": 1,
    }
    job_id = uuid4()
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
        await conn.execute(insert(old_connections).values(row))
        await conn.execute(
            insert(old_jobs).values(
                job_id=job_id, status="pending", created_at=T0, lease_until=None, attempts=0
            )
        )
        await conn.execute(insert(old_datasources).values(job_id=job_id, config_name="billing"))
    return row


async def _upgraded_data_reads_as_the_single_tenants(engine: AsyncEngine) -> None:
    row = await _fill_old_tables(engine)
    repository, index = SqlaConnectionRepository(engine), SqlaJobIndex(engine)
    for _ in range(2):  # upgrading twice changes nothing
        await repository.create_schema()
        await index.create_schema()

    found = await repository.get(row["id"], tenant=SINGLE_TENANT)
    assert found is not None and found.tenant == SINGLE_TENANT
    assert (found.config_name, found.product_name, found.created_at) == ("billing", "payments", T0)
    assert await repository.get(row["id"], tenant=A) is None
    with pytest.raises(Conflict):
        await repository.add(replace(found, id=uuid4()))
    in_a = replace(found, id=uuid4(), tenant=A)
    await repository.add(in_a)  # the same name in another tenant: the old index is gone
    assert await repository.get(in_a.id, tenant=A) == in_a

    assert await index.is_connection_in_use("billing", tenant=SINGLE_TENANT)
    assert not await index.is_connection_in_use("billing", tenant=A)

    async with engine.connect() as conn:
        names = await conn.run_sync(
            lambda sync: {i["name"] for i in inspect(sync).get_indexes("fetcher_connections")}
        )
    assert "uq_fetcher_connections_config_name_live" not in names
    assert "uq_fetcher_connections_tenant_config_name_live" in names


async def test_sqlite_tables_of_the_previous_version_are_upgraded(tmp_path: Path) -> None:
    engine = create_engine_for(tmp_path / "data.db")
    try:
        await _upgraded_data_reads_as_the_single_tenants(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def pg_database() -> Iterator[str]:
    with fresh_pg_database("fetcher_tenant_upgrade") as url:
        yield url


async def test_postgres_tables_of_the_previous_version_are_upgraded(pg_database: str) -> None:
    engine = create_engine_for(PostgresAddress.from_url(pg_database))
    try:
        await _upgraded_data_reads_as_the_single_tenants(engine)
    finally:
        await engine.dispose()


async def test_a_requested_event_recorded_without_a_tenant_is_the_single_tenants(
    tmp_path: Path,
) -> None:
    store_file = tmp_path / "events.db"
    request = ExtractionRequest.create({"pg": {"t": ["a"]}}, None, {"source": "p"})
    event = request_job(uuid4(), request, T0, tenant=SINGLE_TENANT)
    store = event_store_for(store_file)
    await store.append([event])
    await store.close()
    with sqlite3.connect(store_file) as db:  # as the version before tenants wrote it
        (state,) = db.execute("SELECT state FROM stored_events").fetchone()
        old = json.loads(state)
        del old["tenant"], old["class_version"]
        db.execute("UPDATE stored_events SET state = ?", (json.dumps(old).encode(),))

    store = event_store_for(store_file)
    try:
        [read] = await store.job_events(event.originator_id)
        assert read.tenant == ""  # type: ignore[attr-defined]
        job = await GetJob(EventSourcedJobs(store))(event.originator_id, tenant=SINGLE_TENANT)
        assert job.tenant == SINGLE_TENANT and job.request.request_hash == request.request_hash
        with pytest.raises(FetcherError) as caught:
            await GetJob(EventSourcedJobs(store))(event.originator_id, tenant=A)
        assert caught.value.code == "FET-1001"
        [entry] = await GetJobHistory(EventSourcedJobs(store))(
            event.originator_id, tenant=SINGLE_TENANT
        )
        assert "tenant" not in entry.facts
    finally:
        await store.close()
