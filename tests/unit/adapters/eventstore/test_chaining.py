"""Job events are chained as the store records them; old events are read by upcasting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from adapters.eventstore.store import EventsourcingJobEventStore
from domain import job as jobs
from domain.audit_chain import GENESIS, parse_state, record_digest
from domain.job import JobClaimed, JobRequested
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _request() -> ExtractionRequest:
    return ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "payments"})


async def test_each_job_event_links_to_the_one_before_it() -> None:
    store = EventsourcingJobEventStore.in_memory()
    try:
        job_id = uuid4()
        requested = jobs.request_job(job_id, _request(), T0, tenant=SINGLE_TENANT)
        await store.append([requested])
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        await store.append([jobs.claim(job, "w1", T0, timedelta(minutes=1))])
        records = await store.read_records(0, 10)
        first, second = (parse_state(r.state) for r in records)
        assert first["prev_digest"] == GENESIS
        assert first["digest"] == record_digest(records[0])
        assert second["prev_digest"] == first["digest"]
        assert second["digest"] == record_digest(records[1])
        events = await store.job_events(job_id)
        assert [e.digest for e in events] == [first["digest"], second["digest"]]
    finally:
        await store.close()


async def test_a_fresh_store_instance_reads_the_previous_digest() -> None:
    store = EventsourcingJobEventStore.in_memory()
    try:
        job_id = uuid4()
        await store.append([jobs.request_job(job_id, _request(), T0, tenant=SINGLE_TENANT)])
        store._chain = type(store._chain)()  # forget the remembered heads
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        store._chain = type(store._chain)()
        await store.append([jobs.claim(job, "w1", T0, timedelta(minutes=1))])
        first, second = (parse_state(r.state) for r in await store.read_records(0, 10))
        assert second["prev_digest"] == first["digest"]
    finally:
        await store.close()


def test_events_recorded_before_chaining_are_upcast_unchained() -> None:
    state: dict[str, object] = {"worker_id": "w", "lease_until": T0, "attempt": 1}
    JobClaimed.upcast_v1_v2(state)
    assert state["prev_digest"] == "" and state["digest"] == ""
    requested: dict[str, object] = {"request": {}, "request_hash": "x", "tenant": ""}
    JobRequested.upcast_v2_v3(requested)
    assert requested["digest"] == ""
