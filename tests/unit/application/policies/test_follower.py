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


async def test_a_failing_loop_logs_once_when_it_starts_failing_and_once_when_it_recovers(
    caplog,
):
    import asyncio
    import logging

    from application.policies.follower import PeriodicTask

    outcomes = [OSError("db down")] * 5 + [None] * 3
    done = asyncio.Event()

    async def action() -> int:
        if not outcomes:
            done.set()
            return 0
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return 0

    task = PeriodicTask(name="reaper", poll_interval=0.001, max_backoff=0.002, action=action)
    stop = asyncio.Event()
    with caplog.at_level(logging.DEBUG, logger="application.policies.follower"):
        running = asyncio.create_task(task.run(stop))
        await asyncio.wait_for(done.wait(), 5)
        stop.set()
        await running
    above_debug = [
        (r.levelname, r.getMessage()) for r in caplog.records if r.levelno > logging.DEBUG
    ]
    assert above_debug == [
        ("WARNING", "reaper: failing, will retry with backoff: db down"),
        ("INFO", "reaper: recovered"),
    ]
