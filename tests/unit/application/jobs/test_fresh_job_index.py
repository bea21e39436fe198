"""The job index made fresh: it catches up with the event log before it answers."""

from __future__ import annotations

from adapters.memory.job_index import InMemoryJobIndex
from application.jobs.fresh_index import FreshJobIndex
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}


async def test_fresh_index_sees_a_job_recorded_a_moment_ago(app):
    index = InMemoryJobIndex()
    await app.connection()
    await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    assert not await index.is_connection_in_use(
        "pgsql", tenant=SINGLE_TENANT
    )  # nobody fed the projection
    assert await FreshJobIndex(index, app.store).is_connection_in_use("pgsql", tenant=SINGLE_TENANT)
    assert await index.position() > 0
