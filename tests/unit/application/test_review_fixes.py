from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.memory.job_index import InMemoryJobIndex
from application.commands.run_job import RunLimits
from application.fresh_job_index import FreshJobIndex
from application.policies.requeue_pending import RequeuePending
from domain import job as jobs
from domain.connection import SealedSecret
from domain.job import JobFailed

SOURCE = {"source": "payments"}


def test_lease_outlasts_every_attempt_with_its_backoff():
    assert RunLimits.lease_for(300) == timedelta(seconds=3 * 300 + 1 + 2 + 60)
    assert RunLimits().claim_lease == RunLimits.lease_for(300)
    assert RunLimits(timeout=60).claim_lease == timedelta(seconds=3 * 60 + 3 + 60)
    with pytest.raises(ValueError, match="shorter than the work"):
        RunLimits(timeout=600, lease=timedelta(minutes=10))


async def test_fresh_index_sees_a_job_recorded_a_moment_ago(app):
    index = InMemoryJobIndex()
    await app.connection()
    await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE)
    assert not await index.is_connection_in_use("pgsql")  # nobody fed the projection
    assert await FreshJobIndex(index, app.store).is_connection_in_use("pgsql")
    assert await index.position() > 0


async def test_pending_jobs_are_requeued_after_a_restart_but_not_ended_ones(app):
    await app.connection()
    pending = (await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE)).job
    ended = (await app.request_job({"pgsql": {"accounts": ["name"]}}, None, SOURCE)).job
    await app.run_job(ended.id)
    index = FreshJobIndex(InMemoryJobIndex(), app.store)
    count = await RequeuePending(app.store, index, app.queue, app.clock)()
    assert count == 1
    assert [o.job_id for o in app.queue.published] == [pending.id]


async def test_credentials_under_a_retired_key_fail_the_job_at_once(app):
    connection = await app.connection()
    job = (await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE)).job
    from dataclasses import replace

    retired = SealedSecret(connection.password.ciphertext, key_version="0")  # type: ignore[union-attr]
    await app.repository.update(
        replace(connection, password=retired, version=connection.version + 1)
    )
    app.run_job.limits = RunLimits(retry_backoff=30.0)  # a retry would make this test hang
    await app.run_job(job.id)
    last = (await app.store.job_events(job.id))[-1]
    assert isinstance(last, JobFailed)
    assert "key version '0'" in last.error and "[precondition]" in last.error


def test_apply_returns_the_next_snapshot():
    from datetime import UTC, datetime
    from uuid import uuid4

    from domain.request import ExtractionRequest

    now = datetime(2026, 1, 1, tzinfo=UTC)
    requested = jobs.request_job(
        uuid4(), ExtractionRequest.create({"a": {"t": ["x"]}}, None, SOURCE), now
    )
    assert jobs.apply(requested, None).status == "pending"
