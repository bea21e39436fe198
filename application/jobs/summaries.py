"""How job events change a job's summary in the projection (shared by every JobIndex)."""

from __future__ import annotations

from dataclasses import replace

from application.ports.job_index import JobSummary
from domain.job import JobClaimed, JobCompleted, JobEvent, JobFailed, JobRequested
from domain.tenant import Tenant


def summarise(summary: JobSummary | None, event: object) -> JobSummary | None:
    """The summary after ``event``; ``summary`` unchanged for events that do not touch it."""
    if isinstance(event, JobRequested):
        if summary is not None:
            return summary
        return JobSummary(
            job_id=event.originator_id,
            status="pending",
            datasources=tuple(sorted(event.request["mappedFields"])),
            created_at=event.timestamp,
            lease_until=None,
            attempts=0,
            tenant=Tenant(event.tenant),
            source=_source_of(event.request),
        )
    if summary is None or not isinstance(event, JobEvent):
        return summary
    if isinstance(event, JobClaimed):
        return replace(
            summary, status="processing", lease_until=event.lease_until, attempts=event.attempt
        )
    if isinstance(event, JobCompleted):
        return replace(summary, status="completed", lease_until=None)
    if isinstance(event, JobFailed):
        return replace(summary, status="failed", lease_until=None)
    return summary


def _source_of(request: object) -> str:
    metadata = request.get("metadata") if isinstance(request, dict) else None
    source = metadata.get("source") if isinstance(metadata, dict) else None
    return source if isinstance(source, str) else ""
