"""A job runs in a task its worker owns: a delivery cancelled by its consumer (a closing
channel) leaves the extraction running, a redelivery joins it, and stopping hands it back."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from application.jobs.commands.run_job import RunLimits
from application.jobs.running import RunningJobs
from application.ports.messaging import Settlement, WorkOrder
from domain.job import JobClaimed, JobCompleted, JobRequested, JobResultStored
from domain.tenant import SINGLE_TENANT
from entrypoints.composition.worker import work_handler
from tests.unit.application.jobs.test_job_lease import HeldReader

SOURCE = {"source": "payments"}


async def _running(app):
    await app.connection()
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=timedelta(seconds=8))
    job = (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    reader = HeldReader(app.reader)
    app.run_job.reader = reader
    return job, reader, RunningJobs(work_handler(app.run_job))


def _kinds(events):
    return [type(e) for e in events]


async def test_a_cancelled_delivery_leaves_its_extraction_running_to_the_end(app, caplog):
    job, reader, runs = await _running(app)
    delivery = asyncio.create_task(runs(WorkOrder(job.id, tenant=SINGLE_TENANT)))
    await asyncio.wait_for(reader.holding.wait(), 5)
    with caplog.at_level(logging.WARNING, logger="application.jobs.running"):
        delivery.cancel()  # what the AMQP client does when the channel closes
        await asyncio.gather(delivery, return_exceptions=True)
    assert delivery.cancelled()
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warned] == ["job.delivery.cancelled"]
    assert len(runs) == 1
    reader.release.set()
    for _ in range(200):
        if not len(runs):
            break
        await asyncio.sleep(0.01)
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobResultStored, JobCompleted]
    assert len(app.storage.objects) == 1


async def test_a_redelivery_while_the_job_runs_here_is_settled_by_that_run(app):
    job, reader, runs = await _running(app)
    first = asyncio.create_task(runs(WorkOrder(job.id, tenant=SINGLE_TENANT)))
    await asyncio.wait_for(reader.holding.wait(), 5)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    again = asyncio.create_task(runs(WorkOrder(job.id, tenant=SINGLE_TENANT)))
    await asyncio.sleep(0.05)
    assert not again.done()  # waits for the run, no second claim
    reader.release.set()
    assert await asyncio.wait_for(again, 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events) == [JobRequested, JobClaimed, JobResultStored, JobCompleted]


async def test_a_redelivery_of_a_finished_job_is_acknowledged_without_effect(app):
    job, reader, runs = await _running(app)
    reader.release.set()
    assert await runs(WorkOrder(job.id, tenant=SINGLE_TENANT)) is Settlement.ACK
    assert await runs(WorkOrder(job.id, tenant=SINGLE_TENANT)) is Settlement.ACK
    assert len(await app.store.job_events(job.id)) == 4


async def test_stopping_hands_a_running_claim_back_at_once(app):
    job, reader, runs = await _running(app)
    delivery = asyncio.create_task(runs(WorkOrder(job.id, tenant=SINGLE_TENANT)))
    await asyncio.wait_for(reader.holding.wait(), 5)
    await runs.stop()
    await asyncio.gather(delivery, return_exceptions=True)
    held = await app.job_index.hold(job.id)
    assert held.until == app.clock.now()  # released: no need to wait out the lease
    assert app.storage.pending_uploads == 0
    reader.release.set()
    other = app.run_job
    other.worker_id = "worker-2"
    assert await asyncio.wait_for(other(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert _kinds(events)[-1] is JobCompleted and events[2].worker_id == "worker-2"
