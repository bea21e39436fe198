"""A claim's lease: short, renewed in place by its worker's heartbeat, taken over one lease
after a dead worker's last beat, and a worker that lost it records nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from application.commands.run_job import RunLimits
from application.ports.messaging import Settlement
from domain import job as jobs
from domain.job import JobClaimed, JobCompleted, JobRequested, JobResultStored

SOURCE = {"source": "payments"}
LEASE = timedelta(seconds=2)  # heartbeat every 0.5 s (real time); the lease runs on the fake clock


class HeldReader:
    """The in-memory reader, holding its stream after the first chunk until ``release``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stream(self, endpoint: Any, prepared: Any) -> AsyncIterator[Any]:
        async for chunk in self._inner.stream(endpoint, prepared):
            yield chunk
            self.holding.set()
            await self.release.wait()


async def _requested(app):
    await app.connection()
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=LEASE, watch_interval=0.01)
    return (await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE)).job


async def _claimed_by(app, job, worker: str):
    """``worker`` claims ``job`` as a worker does (lease first, then the event), then dies."""
    now = app.clock.now()
    assert await app.job_index.take(job.id, job.attempts + 1, worker, now, now + LEASE)
    await app.store.append([jobs.claim(job, worker, now, LEASE)])
    return jobs.fold(await app.store.job_events(job.id))


def _kinds(events):
    return [type(e) for e in events]


async def test_a_dead_workers_redelivered_job_is_taken_over_once_its_lease_ends(app):
    job = await _claimed_by(app, await _requested(app), "dead-worker")
    running = asyncio.create_task(app.run_job(job.id))
    await asyncio.sleep(0.1)
    assert not running.done()  # the lease is live: the redelivery waits on it
    app.clock.advance(seconds=2)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobClaimed, JobResultStored, JobCompleted]
    assert (events[2].worker_id, events[2].attempt) == ("worker-1", 2)


async def test_a_redelivery_leaves_a_job_whose_holder_renews_its_lease(app):
    job = await _claimed_by(app, await _requested(app), "live-worker")
    running = asyncio.create_task(app.run_job(job.id))
    await asyncio.sleep(0.1)
    assert not running.done()
    app.clock.advance(seconds=1)
    assert await app.job_index.renew(job.id, 1, "live-worker", app.clock.now() + LEASE)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]


async def test_the_heartbeat_renews_the_lease_in_place_without_adding_events(app):
    job = await _requested(app)
    reader = HeldReader(app.reader)
    app.run_job.reader = reader
    running = asyncio.create_task(app.run_job(job.id))
    await asyncio.wait_for(reader.holding.wait(), 5)
    first = (await app.job_index.hold(job.id)).until
    for _ in range(3):
        app.clock.advance(seconds=1)
        await asyncio.sleep(0.6)
    renewed = await app.job_index.hold(job.id)
    assert renewed.until > first and renewed.worker_id == "worker-1"
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]
    reader.release.set()
    assert await running is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id))[-1] is JobCompleted


async def test_a_worker_that_lost_its_lease_stops_and_records_nothing(app):
    job = await _requested(app)
    reader = HeldReader(app.reader)
    app.run_job.reader = reader
    running = asyncio.create_task(app.run_job(job.id))
    await asyncio.wait_for(reader.holding.wait(), 5)
    # The worker's beats went unseen; its lease ended and another worker took the job.
    app.clock.advance(seconds=3)
    now = app.clock.now()
    assert await app.job_index.take(job.id, 2, "other-worker", now, now + LEASE)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]
    assert app.storage.objects == {}
    assert app.storage.pending_uploads == 0  # its upload was aborted


async def test_a_claim_lost_between_extraction_and_record_is_not_recorded(app):
    job = await _requested(app)
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=timedelta(seconds=60))
    taken = asyncio.Event()

    class StealingStorage:
        """Commits, then another worker takes the lease before the outcome is recorded."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def begin(self, key: str) -> Any:
            upload = await self._inner.begin(key)
            commit = upload.commit

            async def stolen_commit() -> None:
                await commit()
                await app.job_index.release(job.id, 1, "worker-1", app.clock.now())
                now = app.clock.now()
                assert await app.job_index.take(job.id, 2, "other", now, now + LEASE)
                taken.set()

            upload.commit = stolen_commit
            return upload

    app.run_job.storage = StealingStorage(app.storage)
    assert await app.run_job(job.id) is Settlement.ACK
    assert taken.is_set()
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]


async def test_a_job_handed_back_can_be_claimed_at_once(app):
    job = await _claimed_by(app, await _requested(app), "leaving-worker")
    await app.job_index.release(job.id, 1, "leaving-worker", app.clock.now())
    assert await asyncio.wait_for(app.run_job(job.id), 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events)[-1] is JobCompleted and events[2].attempt == 2


async def test_a_first_claim_whose_lease_was_taken_but_never_recorded_waits_for_that_lease(app):
    job = await _requested(app)
    now = app.clock.now()
    # A worker took the first lease and died before recording its claim.
    assert await app.job_index.take(job.id, 1, "dead-worker", now, now + LEASE)
    running = asyncio.create_task(app.run_job(job.id))
    await asyncio.sleep(0.1)
    assert not running.done()
    app.clock.advance(seconds=2)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobResultStored, JobCompleted]
    assert events[1].worker_id == "worker-1"
    held = await app.job_index.hold(job.id)
    assert held is None or (held.attempt, held.worker_id) == (2, "worker-1")
