"""The job index made fresh: it catches up with the event log before it answers."""

from __future__ import annotations

from adapters.memory.job_index import InMemoryJobIndex
from application.fresh_job_index import FreshJobIndex

SOURCE = {"source": "payments"}


async def test_fresh_index_sees_a_job_recorded_a_moment_ago(app):
    index = InMemoryJobIndex()
    await app.connection()
    await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE)
    assert not await index.is_connection_in_use("pgsql")  # nobody fed the projection
    assert await FreshJobIndex(index, app.store).is_connection_in_use("pgsql")
    assert await index.position() > 0
