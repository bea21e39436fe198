"""The ``Job`` aggregate: an extraction job whose state is folded from its own events.

Commands are functions that check the invariants against the current snapshot and return the
new event; the snapshot never changes in place. Time, ids and digests are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from functools import singledispatch
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from eventsourcing.domain import DomainEvent

from domain.errors import InvalidTransition
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT, Tenant

DEDUP_WINDOW = timedelta(minutes=5)


class Phase(Enum):
    REQUESTED = "requested"
    CLAIMED = "claimed"
    RESULT_STORED = "result_stored"
    COMPLETED = "completed"
    FAILED = "failed"


# What the API shows for each phase.
STATUS_OF_PHASE: Mapping[Phase, str] = {
    Phase.REQUESTED: "pending",
    Phase.CLAIMED: "processing",
    Phase.RESULT_STORED: "processing",
    Phase.COMPLETED: "completed",
    Phase.FAILED: "failed",
}


class JobEvent(DomainEvent):
    """Base of the job's events (frozen dataclasses with id, version and timestamp).

    Recorded events are chained (``domain.audit_chain``): the event store adds
    ``prev_digest`` and ``digest`` to each one's stored state. Version 2 of every job event
    reads them; an event recorded before chaining is upcast with both empty.
    """

    prev_digest: ClassVar[str] = ""
    digest: ClassVar[str] = ""

    class_version = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        _unchained(state)


def _unchained(state: dict[str, Any]) -> None:
    state.setdefault("prev_digest", "")
    state.setdefault("digest", "")


@dataclass(frozen=True)
class JobRequested(JobEvent):
    """A job was asked for, by ``tenant`` (its id; empty for the single tenant).

    Version 2 added ``tenant``; a version-1 event, recorded before tenants existed, is upcast
    when it is read and belongs to the single tenant. Version 3 is chained (see ``JobEvent``).
    """

    request: dict[str, Any]
    request_hash: str
    request_id: str = ""
    """The HTTP request's id (``X-Request-Id``); not part of the request hash."""
    trace_context: dict[str, str] | None = None
    """W3C trace headers of the request's span, so later work joins its trace."""
    tenant: str = ""

    class_version = 3

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["tenant"] = ""

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        _unchained(state)


@dataclass(frozen=True)
class JobClaimed(JobEvent):
    worker_id: str
    lease_until: datetime
    attempt: int


@dataclass(frozen=True)
class JobResultStored(JobEvent):
    worker_id: str
    path: str
    size_bytes: int
    row_count: int
    hmac: str


@dataclass(frozen=True)
class JobCompleted(JobEvent):
    worker_id: str
    execution_time_ms: int


@dataclass(frozen=True)
class JobFailed(JobEvent):
    error: str
    worker_id: str


# The allowed transitions, written down as data: phase -> events that may follow it.
ALLOWED_NEXT: Mapping[Phase, frozenset[type[JobEvent]]] = {
    Phase.REQUESTED: frozenset({JobClaimed, JobFailed}),
    Phase.CLAIMED: frozenset({JobClaimed, JobResultStored, JobFailed}),
    Phase.RESULT_STORED: frozenset({JobCompleted, JobFailed}),
    Phase.COMPLETED: frozenset(),
    Phase.FAILED: frozenset(),
}

TERMINAL_PHASES = frozenset(p for p, nxt in ALLOWED_NEXT.items() if not nxt)


@dataclass(frozen=True, slots=True)
class ResultRef:
    path: str
    size_bytes: int
    row_count: int
    hmac: str


@dataclass(frozen=True, slots=True)
class Job:
    """Immutable snapshot of one job."""

    id: UUID
    version: int
    phase: Phase
    request: ExtractionRequest
    created_at: datetime
    tenant: Tenant = SINGLE_TENANT
    claimed_by: str | None = None
    lease_until: datetime | None = None
    attempts: int = 0
    result: ResultRef | None = None
    finished_at: datetime | None = None
    error: str | None = None
    execution_time_ms: int | None = None
    request_id: str = ""
    trace_context: Mapping[str, str] | None = None

    @property
    def status(self) -> str:
        return STATUS_OF_PHASE[self.phase]

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def is_active(self) -> bool:
        return not self.is_terminal

    def blocks_duplicate(self, now: datetime) -> bool:
        """Whether an identical request made at ``now`` returns this job instead of a new one."""
        if self.phase is Phase.FAILED:
            return False
        return self.is_active or now - self.created_at < DEDUP_WINDOW

    def lease_expired(self, now: datetime) -> bool:
        return self.lease_until is not None and now >= self.lease_until


_E = TypeVar("_E", bound=JobEvent)


def _check(job: Job, event_type: type[JobEvent]) -> None:
    if event_type not in ALLOWED_NEXT[job.phase]:
        raise InvalidTransition(
            f"job {job.id} is {job.phase.value}; {event_type.__name__} cannot follow"
        )


def _check_holder(job: Job, worker_id: str) -> None:
    if job.claimed_by != worker_id:
        raise InvalidTransition(f"job {job.id} is not claimed by this worker")


def _next(job: Job, event_type: type[_E], now: datetime, **facts: Any) -> _E:
    """The ``event_type`` event that follows ``job`` at ``now``, carrying ``facts`` (the
    caller has checked that it may follow)."""
    return event_type(
        originator_id=job.id, originator_version=job.version + 1, timestamp=now, **facts
    )


# Commands: check invariants, return the new event.


def request_job(
    job_id: UUID,
    request: ExtractionRequest,
    now: datetime,
    tenant: Tenant,
    *,
    request_id: str = "",
    trace_context: Mapping[str, str] | None = None,
) -> JobRequested:
    return JobRequested(
        originator_id=job_id,
        originator_version=1,
        timestamp=now,
        request=request.to_dict(),
        request_hash=request.request_hash,
        request_id=request_id,
        trace_context=dict(trace_context) if trace_context else None,
        tenant=tenant.id,
    )


def claim(
    job: Job,
    worker_id: str,
    now: datetime,
    lease: timedelta,
    *,
    lease_ends: datetime | None = None,
) -> JobClaimed:
    """``lease_ends``: when the current claim's lease ends as its holder last renewed or
    released it (kept outside the event log); by default, as recorded with the claim."""
    ends = job.lease_until if lease_ends is None else lease_ends
    if job.phase is Phase.CLAIMED and ends is not None and now < ends:
        raise InvalidTransition(f"job {job.id} is claimed by another worker until its lease ends")
    _check(job, JobClaimed)
    return _next(
        job, JobClaimed, now, worker_id=worker_id, lease_until=now + lease, attempt=job.attempts + 1
    )


def store_result(job: Job, worker_id: str, result: ResultRef, now: datetime) -> JobResultStored:
    _check(job, JobResultStored)
    _check_holder(job, worker_id)
    return _next(
        job,
        JobResultStored,
        now,
        worker_id=worker_id,
        path=result.path,
        size_bytes=result.size_bytes,
        row_count=result.row_count,
        hmac=result.hmac,
    )


def complete(job: Job, worker_id: str, now: datetime, execution_time_ms: int) -> JobCompleted:
    _check(job, JobCompleted)
    _check_holder(job, worker_id)
    return _next(job, JobCompleted, now, worker_id=worker_id, execution_time_ms=execution_time_ms)


def fail(job: Job, error: str, now: datetime, worker_id: str = "") -> JobFailed:
    if worker_id and job.phase is not Phase.REQUESTED:
        _check_holder(job, worker_id)
    _check(job, JobFailed)
    return _next(job, JobFailed, now, error=error, worker_id=worker_id)


# The mutator: copies facts from an event into a new snapshot.


@singledispatch
def _apply(event: JobEvent, job: Job | None) -> Job:
    raise TypeError(f"unknown job event {type(event).__name__}")


@_apply.register
def _(event: JobRequested, job: Job | None) -> Job:
    return Job(
        id=event.originator_id,
        version=event.originator_version,
        phase=Phase.REQUESTED,
        request=ExtractionRequest.restore(event.request, event.request_hash),
        created_at=event.timestamp,
        request_id=event.request_id,
        trace_context=event.trace_context,
        tenant=Tenant(event.tenant),
    )


def _advance(job: Job | None, event: JobEvent, phase: Phase, **changes: Any) -> Job:
    """``job`` at ``event``'s version and in ``phase``, with ``changes``."""
    if job is None:
        raise TypeError(f"{type(event).__name__} cannot start a job")
    return replace(job, version=event.originator_version, phase=phase, **changes)


def _end(job: Job | None, event: JobEvent, phase: Phase, **changes: Any) -> Job:
    """``job`` finished by ``event`` in the terminal ``phase``: its lease is over."""
    return _advance(job, event, phase, finished_at=event.timestamp, lease_until=None, **changes)


@_apply.register
def _(event: JobClaimed, job: Job | None) -> Job:
    return _advance(
        job,
        event,
        Phase.CLAIMED,
        claimed_by=event.worker_id,
        lease_until=event.lease_until,
        attempts=event.attempt,
    )


@_apply.register
def _(event: JobResultStored, job: Job | None) -> Job:
    result = ResultRef(event.path, event.size_bytes, event.row_count, event.hmac)
    return _advance(job, event, Phase.RESULT_STORED, result=result)


@_apply.register
def _(event: JobCompleted, job: Job | None) -> Job:
    return _end(job, event, Phase.COMPLETED, execution_time_ms=event.execution_time_ms)


@_apply.register
def _(event: JobFailed, job: Job | None) -> Job:
    return _end(job, event, Phase.FAILED, error=event.error)


def apply(event: JobEvent, job: Job | None) -> Job:
    """The snapshot after one event."""
    return _apply(event, job)


def fold(events: Iterable[JobEvent], job: Job | None = None) -> Job | None:
    for event in events:
        job = _apply(event, job)
    return job
