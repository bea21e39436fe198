"""A small audited history: jobs recorded through the real store, and signed checkpoints."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID, uuid4

from adapters.crypto.audit_signing import AuditKeys
from adapters.eventstore.store import EventStore
from application.audit.checkpointer import RecordCheckpoints
from application.ports.audit import CheckpointStore
from application.ports.job_event_store import JobEventStore
from domain import job as jobs
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT
from tests.support.twins import FakeClock


def audit_request() -> ExtractionRequest:
    return ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "payments"})


async def record_jobs(store: JobEventStore, clock: FakeClock, n: int) -> list[UUID]:
    """``n`` jobs, each requested, claimed and completed or failed (3 events each)."""
    ids = [uuid4() for _ in range(n)]
    for job_id in ids:
        await store.append(
            [jobs.request_job(job_id, audit_request(), clock.now(), tenant=SINGLE_TENANT)]
        )
    for i, job_id in enumerate(ids):
        clock.advance(seconds=1)
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        await store.append([jobs.claim(job, "w1", clock.now(), timedelta(minutes=1))])
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        await store.append([jobs.fail(job, f"boom {i}", clock.now(), "w1")])
    return ids


async def audited_history(
    store: EventStore,
    checkpoints: CheckpointStore,
    keys: AuditKeys,
    *,
    jobs_count: int = 6,
    every: int = 5,
) -> list[UUID]:
    """Jobs, then checkpoints every ``every`` records over all of them (the last one at the
    log's end)."""
    clock = FakeClock()
    ids = await record_jobs(store, clock, jobs_count)
    recorder = RecordCheckpoints(
        store,
        checkpoints,
        keys.signer,
        clock,
        every_records=every,
        every_seconds=1,
    )
    await recorder()
    clock.advance(seconds=5)
    await recorder()  # the records after the last full stretch, by time
    return ids
