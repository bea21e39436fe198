"""Jobs folded from their events, for the tests of what the publishers send (they are handed a
job, and build its message from it)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from domain import job as rules
from domain.job import Job, ResultRef
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT, Tenant

CREATED = datetime(2026, 7, 13, 13, 0, 0, 123400, tzinfo=UTC)
WORKER = "worker-1"


def requested_job(
    job_id: UUID | None = None,
    *,
    request_id: str = "req-1",
    tenant: Tenant = SINGLE_TENANT,
    metadata: Mapping[str, Any] | None = None,
    filters: Mapping[str, Any] | None = None,
    trace_context: Mapping[str, str] | None = None,
    created_at: datetime = CREATED,
) -> Job:
    """A requested job (``mappedFields`` ``{"db": {"t": ["a"]}}``, ``filters`` on them; metadata
    by default ``{"source": "payments"}``)."""
    request = ExtractionRequest.create(
        {"db": {"t": ["a"]}}, filters, metadata or {"source": "payments"}
    )
    event = rules.request_job(
        job_id or uuid4(),
        request,
        created_at,
        tenant,
        request_id=request_id,
        trace_context=trace_context,
    )
    return rules.apply(event, None)


def ended_job(
    status: str = "completed",
    job_id: UUID | None = None,
    *,
    error: str = "boom",
    finished_at: datetime | None = None,
    **requested: Any,
) -> Job:
    """A job that has ``completed`` (a stored result, 5 rows) or ``failed`` (with ``error``),
    ending at ``finished_at`` (by default a second after it was created)."""
    job = requested_job(job_id, **requested)
    ends = finished_at or job.created_at + timedelta(seconds=1)
    job = rules.apply(rules.claim(job, WORKER, job.created_at, timedelta(minutes=1)), job)
    if status == "failed":
        return rules.apply(rules.fail(job, error, ends, WORKER), job)
    if status != "completed":
        raise ValueError(f"not a terminal status: {status!r}")
    result = ResultRef(f"external-data/{job.id}.json", 120, 5, "ab" * 32)
    job = rules.apply(rules.store_result(job, WORKER, result, ends), job)
    return rules.apply(rules.complete(job, WORKER, ends, 250), job)
