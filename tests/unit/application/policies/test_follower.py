"""The projection follower: the job index follows the event log from its own position."""

from __future__ import annotations

from adapters.memory.job_index import InMemoryJobIndex
from application.policies.follower import ProjectionFollower

SOURCE = {"source": "payments"}


async def _requested(app, table="accounts"):
    await app.connection()
    return (await app.request_job({"pgsql": {table: ["id"]}}, None, SOURCE)).job


async def _projection(app):
    index = InMemoryJobIndex()
    follower = ProjectionFollower(name="projection", store=app.store, index=index)
    return index, follower


async def test_projection_tracks_status_and_datasources(app):
    index, follower = await _projection(app)
    job = await _requested(app)
    await follower.run_once()
    assert await index.is_connection_in_use("pgsql")
    assert not await index.is_connection_in_use("other")
    await app.run_job(job.id)
    await follower.run_once()
    assert index.jobs[job.id].status == "completed"
    assert not await index.is_connection_in_use("pgsql")
    assert await follower.run_once() == 0  # its position moved with its rows
