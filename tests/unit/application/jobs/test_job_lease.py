"""A claim's lease: short, renewed in place by its worker's heartbeat, taken over one lease
after a dead worker's last beat, and a worker that lost it records nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from application.jobs.commands.run_job import RunLimits
from application.jobs.lease import LeaseKeeper, LeaseLost
from application.ports.messaging import Settlement
from domain import job as jobs
from domain.job import JobClaimed, JobCompleted, JobRequested, JobResultStored
from domain.tenant import SINGLE_TENANT

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
    return (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job


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
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
    await asyncio.sleep(0.1)
    assert not running.done()  # the lease is live: the redelivery waits on it
    app.clock.advance(seconds=2)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobClaimed, JobResultStored, JobCompleted]
    assert (events[2].worker_id, events[2].attempt) == ("worker-1", 2)


async def test_a_redelivery_leaves_a_job_whose_holder_renews_its_lease(app):
    job = await _claimed_by(app, await _requested(app), "live-worker")
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
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
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
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
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
    await asyncio.wait_for(reader.holding.wait(), 5)
    # The worker's beats went unseen; its lease ended and another worker took the job.
    app.clock.advance(seconds=3)
    now = app.clock.now()
    assert await app.job_index.take(job.id, 2, "other-worker", now, now + LEASE)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]
    assert app.storage.objects == {}
    assert app.storage.pending_uploads == 0  # its upload was aborted


class StealingStorage:
    """Commits, then runs ``steal`` (another worker taking the job) before the outcome is
    recorded."""

    def __init__(self, inner: Any, steal: Any) -> None:
        self._inner = inner
        self._steal = steal
        self.stolen = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def begin(self, key: str) -> Any:
        upload = await self._inner.begin(key)
        commit = upload.commit

        async def stolen_commit() -> None:
            await commit()
            await self._steal()
            self.stolen = True

        upload.commit = stolen_commit
        return upload


class CountingLeases:
    """The job index's leases, counting renewals (each a round trip to the database)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.renewals = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def renew(self, *args: Any) -> bool:
        self.renewals += 1
        return bool(await self._inner.renew(*args))


async def test_a_claim_whose_lease_ran_out_before_its_record_is_not_recorded(app):
    job = await _requested(app)
    lease = timedelta(seconds=60)  # no heartbeat while the job runs
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=lease)

    async def steal() -> None:
        # The worker stalled past its lease after committing; another worker took the job.
        app.clock.advance(seconds=61)
        now = app.clock.now()
        assert await app.job_index.take(job.id, 2, "other", now, now + lease)

    app.run_job.storage = storage = StealingStorage(app.storage, steal)
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    assert storage.stolen
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]


async def test_a_claim_another_worker_recorded_meanwhile_is_not_recorded(app):
    """Within the time a fresh lease is trusted, only a lease handed over out of turn can be
    lost; the record still fails, as the other worker's claim moved the job's stream on."""
    job = await _requested(app)
    lease = timedelta(seconds=60)
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=lease)

    async def steal() -> None:
        await app.job_index.release(job.id, 1, "worker-1", app.clock.now())
        now = app.clock.now()
        assert await app.job_index.take(job.id, 2, "other", now, now + lease)
        claimed = jobs.fold(await app.store.job_events(job.id))
        await app.store.append([jobs.claim(claimed, "other", now, lease, lease_ends=now)])

    app.run_job.storage = storage = StealingStorage(app.storage, steal)
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    assert storage.stolen
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobClaimed]
    assert events[-1].worker_id == "other"


async def test_a_fresh_lease_is_confirmed_without_asking_the_database(app):
    job = await _requested(app)
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=timedelta(seconds=60))
    app.run_job.leases = leases = CountingLeases(app.job_index)
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id))[-1] is JobCompleted
    assert leases.renewals == 0


async def test_a_lease_older_than_its_fresh_time_is_renewed_once_before_the_result_shows(app):
    job = await _requested(app)
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=timedelta(seconds=60))
    app.run_job.leases = leases = CountingLeases(app.job_index)
    reader = HeldReader(app.reader)
    app.run_job.reader = reader
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
    await asyncio.wait_for(reader.holding.wait(), 5)
    app.clock.advance(seconds=16)  # past a quarter of the lease, well within it
    reader.release.set()
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id))[-1] is JobCompleted
    # Renewed before the upload is committed; that renewal is fresh when the outcome is recorded.
    assert leases.renewals == 1
    held = await app.job_index.hold(job.id)
    assert held is not None and held.until == app.clock.now() + timedelta(seconds=60)


async def test_a_job_handed_back_can_be_claimed_at_once(app):
    job = await _claimed_by(app, await _requested(app), "leaving-worker")
    await app.job_index.release(job.id, 1, "leaving-worker", app.clock.now())
    assert await asyncio.wait_for(app.run_job(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events)[-1] is JobCompleted and events[2].attempt == 2


async def test_a_first_claim_whose_lease_was_taken_but_never_recorded_waits_for_that_lease(app):
    job = await _requested(app)
    now = app.clock.now()
    # A worker took the first lease and died before recording its claim.
    assert await app.job_index.take(job.id, 1, "dead-worker", now, now + LEASE)
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
    await asyncio.sleep(0.1)
    assert not running.done()
    app.clock.advance(seconds=2)
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobResultStored, JobCompleted]
    assert events[1].worker_id == "worker-1"
    held = await app.job_index.hold(job.id)
    assert held is None or (held.attempt, held.worker_id) == (2, "worker-1")


async def test_a_lease_keeper_trusts_its_lease_only_while_fresh_and_never_once_lost(app):
    job = await _requested(app)
    now = app.clock.now()
    assert await app.job_index.take(job.id, 1, "worker-9", now, now + LEASE)
    leases = CountingLeases(app.job_index)
    keeper = LeaseKeeper(
        leases, app.clock, job.id, 1, "worker-9", LEASE, 0.5, held_at=now, fresh_for=LEASE / 4
    )
    await keeper.confirm()
    assert leases.renewals == 0
    app.clock.advance(seconds=0.5)
    await keeper.confirm()
    assert leases.renewals == 1
    await keeper.confirm()  # renewed just now
    assert leases.renewals == 1
    keeper.lost = True
    with pytest.raises(LeaseLost):
        await keeper.confirm()
    with pytest.raises(ValueError):
        LeaseKeeper(leases, app.clock, job.id, 1, "w", LEASE, 0.5, fresh_for=LEASE)
