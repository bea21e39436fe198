"""The reaper: jobs whose worker stopped are redispatched, then failed; jobs nobody picks up
fail after their timeout."""

from __future__ import annotations

from datetime import timedelta

from adapters.memory.job_index import InMemoryJobIndex
from application.policies.follower import ProjectionFollower
from application.policies.reap_jobs import ReapJobs
from domain import job as jobs
from domain.errors import Unavailable
from domain.job import JobFailed
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}
LEASE = timedelta(minutes=10)


async def _requested(app, table="accounts"):
    await app.connection()
    return (
        await app.request_job({"pgsql": {table: ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job


async def _projection(app):
    index = InMemoryJobIndex()
    follower = ProjectionFollower(name="projection", store=app.store, index=index)
    return index, follower


async def test_reaper_redispatches_a_job_whose_lease_ran_out(app):
    index, follower = await _projection(app)
    job = await _requested(app)
    claimed = jobs.claim(job, "dead-worker", app.clock.now(), LEASE)
    await app.store.append([claimed])
    await follower.run_once()
    reaper = ReapJobs(app.jobs, index, app.queue, app.clock)
    assert await reaper() == 0  # lease still running
    app.clock.advance(minutes=11)
    assert await reaper() == 1
    assert [o.job_id for o in app.queue.published] == [job.id]
    assert await reaper() == 0  # not again before redispatch_every
    # a live worker now reclaims it and finishes
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    events = await app.store.job_events(job.id)
    assert events[-1].__class__.__name__ == "JobCompleted"
    assert events[2].worker_id == "worker-1" and events[2].attempt == 2


async def test_reaper_forgets_redispatches_once_they_no_longer_hold_a_job_back(app):
    index, follower = await _projection(app)
    job = await _requested(app)
    await app.store.append([jobs.claim(job, "dead-worker", app.clock.now(), LEASE)])
    await follower.run_once()
    reaper = ReapJobs(app.jobs, index, app.queue, app.clock)
    app.clock.advance(minutes=11)
    assert await reaper() == 1
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    await follower.run_once()
    app.clock.advance(minutes=5)
    assert await reaper() == 0
    assert reaper._redispatched == {}


async def test_reaper_fails_a_job_after_too_many_abandoned_claims(app):
    index, follower = await _projection(app)
    job = await _requested(app)
    for attempt in range(3):
        current = jobs.fold(await app.store.job_events(job.id))
        await app.store.append([jobs.claim(current, f"w{attempt}", app.clock.now(), LEASE)])
        app.clock.advance(minutes=11)
    await follower.run_once()
    assert await ReapJobs(app.jobs, index, app.queue, app.clock)() == 1
    last = (await app.store.job_events(job.id))[-1]
    assert isinstance(last, JobFailed)
    assert last.error == "job abandoned: its worker stopped after 3 attempts"
    await app.emitter.run_once()
    assert [n.status for n in app.publisher.published] == ["failed"]


async def test_reaper_fails_a_job_never_picked_up(app):
    index, follower = await _projection(app)
    job = await _requested(app)
    await follower.run_once()
    reaper = ReapJobs(app.jobs, index, app.queue, app.clock, pending_timeout=timedelta(hours=1))
    app.clock.advance(minutes=59)
    assert await reaper() == 0
    app.clock.advance(minutes=2)
    assert await reaper() == 1
    last = (await app.store.job_events(job.id))[-1]
    assert isinstance(last, JobFailed) and last.error == "job was not picked up within 60 minutes"


async def test_a_failed_redispatch_does_not_stop_the_round_and_is_tried_next_round(app):
    """During a broker outage one job's publish fails: the round still times out and
    redispatches the jobs after it, and the failed one is redispatched next round."""
    app.schemas_unknown_at_submission()
    index, follower = await _projection(app)
    first = await _requested(app, "accounts")
    second = (
        await app.request_job({"pgsql": {"orders": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    for job in (first, second):
        await app.store.append([jobs.claim(job, "dead-worker", app.clock.now(), LEASE)])
    app.clock.advance(minutes=61)
    never_picked = (
        await app.request_job({"pgsql": {"invoices": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    await follower.run_once()
    reaper = ReapJobs(app.jobs, index, app.queue, app.clock, pending_timeout=timedelta(minutes=30))
    app.clock.advance(minutes=31)
    app.queue.fail_next(1)
    assert await reaper() == 2  # one redispatch failed; the other and the timeout went on
    published = [o.job_id for o in app.queue.published]
    assert len(published) == 1 and published[0] in {first.id, second.id}
    last = (await app.store.job_events(never_picked.id))[-1]
    assert isinstance(last, JobFailed)
    assert await reaper() == 1  # the one that failed, tried again
    assert sorted(o.job_id for o in app.queue.published) == sorted([first.id, second.id])


async def test_a_job_that_cannot_be_read_does_not_stop_the_round(app, monkeypatch):
    app.schemas_unknown_at_submission()
    index, follower = await _projection(app)
    unreadable = await _requested(app, "accounts")
    stuck = (
        await app.request_job({"pgsql": {"orders": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    await follower.run_once()
    read = app.store.job_events

    async def job_events(job_id):
        if job_id == unreadable.id:
            raise Unavailable("simulated read failure")
        return await read(job_id)

    monkeypatch.setattr(app.store, "job_events", job_events)
    app.clock.advance(minutes=61)
    assert await ReapJobs(app.jobs, index, app.queue, app.clock)() == 1
    assert isinstance((await read(stuck.id))[-1], JobFailed)
    assert not isinstance((await read(unreadable.id))[-1], JobFailed)
