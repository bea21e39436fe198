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


class CountingStore:
    """The app's store, counting the positions recorded."""

    def __init__(self, store):
        self.store = store
        self.advances: list[int] = []

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def advance(self, follower, notification_id):
        self.advances.append(notification_id)
        await self.store.advance(follower, notification_id)


async def _two_jobs(app):
    """Two jobs and their request slots: four events on the log."""
    await _requested(app)
    await app.request_job({"pgsql": {"accounts": ["id", "name"]}}, None, SOURCE)


async def test_a_batch_records_its_position_once_after_its_last_event(app):
    store = CountingStore(app.store)
    await _two_jobs(app)
    seen = []

    async def handle(item):
        seen.append(item.notification_id)

    follower = LogFollower(name="test", store=store, handle=handle)
    assert await follower.run_once() == 4
    assert seen == [1, 2, 3, 4]
    assert store.advances == [4]
    assert await app.store.position("test") == 4
    assert await follower.run_once() == 0
    assert store.advances == [4]


async def test_a_failing_event_is_retried_after_the_events_before_it_are_recorded(app):
    store = CountingStore(app.store)
    await _two_jobs(app)
    seen = []

    async def handle(item):
        if item.notification_id == 3 and 3 not in seen:
            seen.append(3)
            raise RuntimeError("the broker is away")
        seen.append(item.notification_id)

    follower = LogFollower(name="test", store=store, handle=handle)
    try:
        await follower.run_once()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure was swallowed")
    assert await app.store.position("test") == 2
    assert await follower.run_once() == 2
    assert seen == [1, 2, 3, 3, 4]
    assert await app.store.position("test") == 4
