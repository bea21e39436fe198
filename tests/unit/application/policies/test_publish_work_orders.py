"""Publishing work orders: each requested job gets one, until its dispatch deadline."""

from __future__ import annotations

from application.policies.publish_work_orders import DISPATCH_FAILED
from domain import job as jobs
from domain.job import JobFailed
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}


async def _requested(app, table="accounts"):
    await app.connection()
    return (
        await app.request_job({"pgsql": {table: ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job


async def test_dispatch_retries_then_fails_the_job_after_its_deadline(app):
    job = await _requested(app)
    app.queue.fail_next(100)
    for _ in range(2):
        try:
            await app.dispatcher.run_once()
        except Exception:
            pass
    assert jobs.fold(await app.store.job_events(job.id)).status == "pending"
    app.clock.advance(minutes=11)
    await app.dispatcher.run_once()
    last = (await app.store.job_events(job.id))[-1]
    assert isinstance(last, JobFailed) and last.error == DISPATCH_FAILED
    await app.emitter.run_once()
    assert [n.status for n in app.publisher.published] == ["failed"]


async def test_no_work_order_for_a_job_already_ended(app):
    job = await _requested(app)
    await app.store.append([jobs.fail(job, "cancelled", app.clock.now())])
    await app.dispatcher.run_once()
    assert app.queue.published == []
