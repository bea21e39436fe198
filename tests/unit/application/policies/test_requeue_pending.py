"""Requeueing at start-up: jobs still pending get their work order again."""

from __future__ import annotations

from adapters.memory.job_index import InMemoryJobIndex
from application.jobs.fresh_index import FreshJobIndex
from application.policies.requeue_pending import RequeuePending
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}


async def test_pending_jobs_are_requeued_after_a_restart_but_not_ended_ones(app):
    await app.connection()
    pending = (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    ended = (
        await app.request_job({"pgsql": {"accounts": ["name"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    await app.run_job(ended.id, tenant=SINGLE_TENANT)
    index = FreshJobIndex(InMemoryJobIndex(), app.store)
    count = await RequeuePending(app.jobs, index, app.queue, app.clock)()
    assert count == 1
    assert [o.job_id for o in app.queue.published] == [pending.id]
