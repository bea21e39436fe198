"""The projection follower: the job index follows the event log from its own position."""

from __future__ import annotations

import asyncio

from adapters.memory.job_index import InMemoryJobIndex
from application.policies.follower import LogFollower, ProjectionFollower

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


class GatedStore:
    """The app's store, whose first log read waits at a gate (a slow read)."""

    def __init__(self, store):
        self.store = store
        self.reading = asyncio.Event()
        self.gate = asyncio.Event()

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def read_log(self, after, limit):
        logged = await self.store.read_log(after, limit)
        if not self.gate.is_set():
            self.reading.set()
            await self.gate.wait()
        return logged


async def test_a_wake_during_a_read_is_not_lost(app):
    store = GatedStore(app.store)
    seen = []

    async def handle(item):
        seen.append(item.notification_id)

    follower = LogFollower(name="test", store=store, handle=handle, poll_interval=60)
    stop = asyncio.Event()
    running = asyncio.create_task(follower.run(stop))
    try:
        await asyncio.wait_for(store.reading.wait(), 5)  # read the empty log, not returned yet
        await _requested(app)  # the job and its request slot
        follower.wake.set()
        store.gate.set()
        for _ in range(500):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        assert seen == [1, 2]
    finally:
        stop.set()
        await running
