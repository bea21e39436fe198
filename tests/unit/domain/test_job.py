from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from domain import job as jobs
from domain.errors import InvalidTransition
from domain.job import (
    ALLOWED_NEXT,
    JobClaimed,
    JobCompleted,
    JobFailed,
    JobRequested,
    JobResultStored,
    Phase,
    ResultRef,
)
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
LEASE = timedelta(minutes=10)
RESULT = ResultRef(path="external-data/x.json", size_bytes=10, row_count=2, hmac="ab" * 32)


def request() -> ExtractionRequest:
    return ExtractionRequest.create({"pg": {"accounts": ["id"]}}, None, {"source": "payments"})


def given(*steps):
    """Folds the events produced by ``steps`` (each a function of the current job)."""
    job_id = uuid4()
    events = [jobs.request_job(job_id, request(), T0, tenant=SINGLE_TENANT)]
    job = jobs.fold(events)
    for step in steps:
        event = step(job)
        events.append(event)
        job = jobs.fold([event], job)
    return job, events


def claimed_by(worker, at=T0):
    return lambda job: jobs.claim(job, worker, at, LEASE)


def stored_by(worker):
    return lambda job: jobs.store_result(job, worker, RESULT, T0)


def test_requested_job_is_pending_at_version_one():
    job, events = given()
    assert isinstance(events[0], JobRequested)
    assert job.version == 1
    assert job.status == "pending"
    assert job.request.mapped_fields["pg"]["accounts"] == ("id",)


def test_claim_of_requested_job_records_worker_and_lease():
    job, _ = given()
    event = jobs.claim(job, "w1", T0, LEASE)
    assert isinstance(event, JobClaimed)
    assert (event.originator_version, event.worker_id, event.lease_until) == (2, "w1", T0 + LEASE)
    assert jobs.fold([event], job).status == "processing"


def test_claim_rejected_when_already_claimed_and_lease_running():
    job, _ = given(claimed_by("w1"))
    with pytest.raises(InvalidTransition):
        jobs.claim(job, "w2", T0 + timedelta(minutes=1), LEASE)


def test_expired_lease_can_be_reclaimed_by_another_worker():
    job, _ = given(claimed_by("w1"))
    event = jobs.claim(job, "w2", T0 + LEASE, LEASE)
    after = jobs.fold([event], job)
    assert (after.claimed_by, after.attempts, after.version) == ("w2", 2, 3)


def test_result_stored_only_by_the_claiming_worker():
    job, _ = given(claimed_by("w1"))
    with pytest.raises(InvalidTransition):
        jobs.store_result(job, "w2", RESULT, T0)
    event = jobs.store_result(job, "w1", RESULT, T0)
    assert isinstance(event, JobResultStored)
    assert jobs.fold([event], job).result == RESULT


def test_result_cannot_be_stored_before_a_claim():
    job, _ = given()
    with pytest.raises(InvalidTransition):
        jobs.store_result(job, "w1", RESULT, T0)


def test_completed_only_after_result_stored():
    job, _ = given(claimed_by("w1"))
    with pytest.raises(InvalidTransition):
        jobs.complete(job, "w1", T0, 5)
    job, _ = given(claimed_by("w1"), stored_by("w1"))
    event = jobs.complete(job, "w1", T0 + timedelta(seconds=3), 3000)
    assert isinstance(event, JobCompleted)
    done = jobs.fold([event], job)
    assert (done.status, done.finished_at, done.execution_time_ms) == (
        "completed",
        T0 + timedelta(seconds=3),
        3000,
    )


@pytest.mark.parametrize(
    "steps",
    [
        (claimed_by("w1"), stored_by("w1"), lambda j: jobs.complete(j, "w1", T0, 1)),
        (lambda j: jobs.fail(j, "boom", T0),),
    ],
)
def test_nothing_follows_a_terminal_event(steps):
    job, _ = given(*steps)
    assert job.is_terminal
    for command in (
        lambda: jobs.claim(job, "w9", T0 + LEASE * 10, LEASE),
        lambda: jobs.fail(job, "again", T0),
        lambda: jobs.store_result(job, "w1", RESULT, T0),
        lambda: jobs.complete(job, "w1", T0, 1),
    ):
        with pytest.raises(InvalidTransition):
            command()


def test_failure_by_another_worker_is_rejected_but_the_reaper_may_fail_it():
    job, _ = given(claimed_by("w1"))
    with pytest.raises(InvalidTransition):
        jobs.fail(job, "x", T0, worker_id="w2")
    event = jobs.fail(job, "lease expired", T0)
    assert isinstance(event, JobFailed)
    assert jobs.fold([event], job).error == "lease expired"


def test_transition_table_is_exactly_the_documented_one():
    assert {p: {e.__name__ for e in nxt} for p, nxt in ALLOWED_NEXT.items()} == {
        Phase.REQUESTED: {"JobClaimed", "JobFailed"},
        Phase.CLAIMED: {"JobClaimed", "JobResultStored", "JobFailed"},
        Phase.RESULT_STORED: {"JobCompleted", "JobFailed"},
        Phase.COMPLETED: set(),
        Phase.FAILED: set(),
    }


def test_duplicate_blocking_rules():
    job, _ = given()
    assert job.blocks_duplicate(T0 + timedelta(hours=5))  # active: always blocks
    done, _ = given(claimed_by("w1"), stored_by("w1"), lambda j: jobs.complete(j, "w1", T0, 1))
    assert done.blocks_duplicate(T0 + timedelta(minutes=4))
    assert not done.blocks_duplicate(T0 + timedelta(minutes=5))
    failed, _ = given(lambda j: jobs.fail(j, "x", T0))
    assert not failed.blocks_duplicate(T0)


def test_apply_returns_the_next_snapshot():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    requested = jobs.request_job(
        uuid4(),
        ExtractionRequest.create({"a": {"t": ["x"]}}, None, {"source": "payments"}),
        now,
        tenant=SINGLE_TENANT,
    )
    assert jobs.apply(requested, None).status == "pending"


def test_claim_follows_the_renewed_lease_not_the_recorded_one():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    request = ExtractionRequest.restore(
        {"mappedFields": {"pgsql": {"t": ["id"]}}, "filters": {}}, "h"
    )
    job = jobs.fold([jobs.request_job(uuid4(), request, t0, tenant=SINGLE_TENANT)])
    assert job is not None
    lease = timedelta(seconds=20)
    held = jobs.apply(jobs.claim(job, "w1", t0, lease), job)
    later = t0 + timedelta(seconds=30)
    # Renewed past its recorded end: still held.
    with pytest.raises(InvalidTransition):
        jobs.claim(held, "w2", later, lease, lease_ends=later + lease)
    # Handed back before its recorded end: free at once.
    early = t0 + timedelta(seconds=5)
    assert jobs.claim(held, "w2", early, lease, lease_ends=early).attempt == 2
    with pytest.raises(InvalidTransition):
        jobs.claim(held, "w2", early, lease)
