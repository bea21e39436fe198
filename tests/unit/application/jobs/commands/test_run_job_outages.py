"""A running job rides out its result storage or its database being down for the outage
window, and nothing it began is left behind: a dead worker's upload is aborted when its job
is claimed again, an upload that could not be aborted during an outage once it is over."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from application.errors import StorageRejected
from application.jobs.commands.run_job import RunLimits
from application.ports.messaging import Settlement
from domain import job as jobs
from domain.job import JobClaimed, JobCompleted, JobFailed, JobRequested, JobResultStored
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}
LEASE = timedelta(seconds=8)


async def _requested(app, window: float = 5.0):
    await app.connection()
    app.run_job.limits = RunLimits(
        retry_backoff=0.01, max_backoff=0.05, lease=LEASE, outage_window=window
    )
    return (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job


def _kinds(events):
    return [type(e) for e in events]


async def test_a_storage_outage_shorter_than_the_window_only_delays_the_job(app):
    job = await _requested(app)
    app.storage.unavailable = True
    running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
    await asyncio.sleep(0.5)  # many tries, all failing
    assert not running.done()
    app.storage.unavailable = False  # the storage comes back
    assert await asyncio.wait_for(running, 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobResultStored, JobCompleted]
    assert len(app.storage.objects) == 1
    assert app.storage.pending_uploads == 0  # the uploads the outage left were swept


async def test_a_storage_outage_past_the_window_fails_the_job_and_leaves_no_object(app):
    job = await _requested(app, window=0.3)
    app.storage.unavailable = True
    assert await asyncio.wait_for(app.run_job(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobFailed]
    assert app.storage.objects == {}


async def test_storage_that_refuses_fails_the_job_without_waiting_out_the_window(app):
    job = await _requested(app, window=60.0)

    async def refused(key: str):
        raise StorageRejected("s3 put object failed: access denied (AccessDenied)")

    app.storage.begin = refused  # type: ignore[method-assign]
    assert await asyncio.wait_for(app.run_job(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id))[-1] is JobFailed


async def test_a_database_outage_at_the_record_is_ridden_out(app):
    job = await _requested(app)
    original = app.store.append
    calls = []

    async def append(events):
        calls.append(events)
        if any(isinstance(e, JobResultStored) for e in events) and len(calls) == 2:
            # The database goes down just as the outcome is recorded, for 0.3 s.
            app.store.unavailable = app.job_index.unavailable = True
            asyncio.get_running_loop().call_later(0.3, back)
        return await original(events)

    def back():
        app.store.unavailable = app.job_index.unavailable = False

    app.store.append = append  # type: ignore[method-assign]
    assert await asyncio.wait_for(app.run_job(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    # Failed while the database was down, tried again until recorded, with the same events.
    assert len(calls) >= 3 and all(events == calls[1] for events in calls[2:])
    assert _kinds(await app.store.job_events(job.id))[-1] is JobCompleted


async def test_a_database_outage_past_the_window_hands_the_delivery_back(app):
    job = await _requested(app, window=0.3)
    original = app.store.append

    async def down_before_record(events):
        if any(isinstance(e, JobClaimed) for e in events):
            return await original(events)
        app.store.unavailable = True
        return await original(events)

    app.store.append = down_before_record  # type: ignore[method-assign]
    assert (
        await asyncio.wait_for(app.run_job(job.id, tenant=SINGLE_TENANT), 5) is Settlement.REQUEUE
    )
    app.store.unavailable = False
    assert _kinds(await app.store.job_events(job.id)) == [JobRequested, JobClaimed]


async def test_a_dead_workers_upload_is_aborted_when_its_job_is_claimed_again(app):
    job = await _requested(app)
    now = app.clock.now()
    assert await app.job_index.take(job.id, 1, "dead-worker", now, now + LEASE)
    await app.store.append([jobs.claim(job, "dead-worker", now, LEASE)])
    left = await app.storage.begin(f"external-data/{job.id}.json")
    await left.write(b"half a result")
    assert app.storage.pending_uploads == 1
    app.clock.advance(seconds=9)  # its lease ended with no heartbeat
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    assert app.storage.pending_uploads == 0
    assert _kinds(await app.store.job_events(job.id))[-1] is JobCompleted


async def test_an_upload_the_outage_left_is_aborted_once_the_job_completes(app):
    # The storage dies mid-write, so the try can abort nothing; the sweep before the next
    # try finds it still down; it is back for that try, which completes.
    job = await _requested(app)
    storage = app.storage
    begin, sweep = storage.begin, storage.abort_incomplete
    begun = 0

    async def dies_after_the_first_begin(key: str):
        nonlocal begun
        begun += 1
        upload = await begin(key)
        if begun == 1:
            storage.unavailable = True
        return upload

    async def sweep_while_down(key: str):
        try:
            return await sweep(key)
        finally:
            storage.unavailable = False  # back right after the failed sweep

    storage.begin = dies_after_the_first_begin
    storage.abort_incomplete = sweep_while_down
    assert await asyncio.wait_for(app.run_job(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    assert _kinds(await app.store.job_events(job.id))[-1] is JobCompleted
    assert begun == 2
    assert storage.pending_uploads == 0
