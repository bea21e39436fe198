"""What the service counts, as each part of it sees it: the use cases and policies call these
where the work happens; the composition root gives them one implementation (Prometheus in a
process, an in-memory twin in tests).

Every label value is from a small, fixed vocabulary (a reason class, a follower name, a
dependency, a message kind), never a job id, a tenant or an error text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol


class FailureReason(StrEnum):
    """Why a job failed, as a class small enough to be a metric label."""

    VALIDATION = "validation"
    """The request does not fit the datasource (unknown table or field, bad filter value)."""
    NOT_FOUND = "not_found"
    """A datasource the job names has no connection."""
    PRECONDITION = "precondition"
    """Something the job needs is missing (the key that encrypted a connection's credentials)."""
    UNAVAILABLE = "unavailable"
    """A datasource could not be reached or failed while being read."""
    TIMEOUT = "timeout"
    """The extraction exceeded its deadline."""
    LIMIT_EXCEEDED = "limit_exceeded"
    """The result grew past the size limit."""
    STORAGE = "storage"
    """The result could not be written to object storage."""
    DISPATCH = "dispatch"
    """The work order could not be published before the dispatch deadline."""
    NOT_PICKED_UP = "not_picked_up"
    """No worker claimed the job within the pending timeout."""
    ABANDONED = "abandoned"
    """Its workers stopped holding the job after the last allowed claim."""
    INTERNAL = "internal"
    """Anything else (a bug)."""


class MessageKind(StrEnum):
    """What a publish carried."""

    WORK_ORDER = "work_order"
    EVENT = "event"


class JobMetrics(Protocol):
    """Jobs as the API records them and as workers run them."""

    def job_requested(self, *, duplicate: bool) -> None:
        """A job request was accepted: a new job, or (``duplicate``) an existing one returned."""
        ...

    def job_completed(self, *, seconds: float, rows: int, size_bytes: int) -> None:
        """A worker recorded a job's result: claim to outcome in ``seconds``."""
        ...

    def job_failed(self, reason: FailureReason, *, seconds: float | None = None) -> None:
        """A job was recorded as failed; ``seconds`` from claim to outcome when a worker ran
        it (the reaper and the dispatcher fail jobs no worker ran)."""
        ...

    def result_uploaded(self, seconds: float) -> None:
        """Time a worker spent writing one result to object storage (parts and commit)."""
        ...


class RelayMetrics(Protocol):
    """The followers of the event log and the reaper."""

    def publish_failed(self, kind: MessageKind) -> None:
        """A publish was refused or not confirmed (it will be retried)."""
        ...

    def publish_retried(self, kind: MessageKind) -> None:
        """A message is being published again after a failed attempt."""
        ...

    def lease_expired(self) -> None:
        """The reaper found a processing job whose worker's lease ran out."""
        ...

    def job_reclaimed(self) -> None:
        """The reaper dispatched such a job again, for another worker to claim."""
        ...

    def follower_lag(self, follower: str, notifications: int) -> None:
        """How many notifications of the log a follower has still to handle."""
        ...

    def unroutable_held(self, kind: MessageKind, messages: int) -> None:
        """How many messages of ``kind`` the broker returned as unroutable and are held
        (published again until a queue takes them)."""
        ...


class ReadinessMetrics(Protocol):
    """Readiness checks (the reference's three series, §7.4)."""

    def check_observed(self, dependency: str, status: str, milliseconds: float) -> None:
        """One readiness check of ``dependency`` ended with ``status`` after ``milliseconds``."""
        ...

    def self_probe(self, dependency: str, *, up: bool) -> None:
        """The start-up self-probe's latest result for ``dependency``."""
        ...


class Metrics(JobMetrics, RelayMetrics, ReadinessMetrics, Protocol):
    """All of the above, as one implementation provides them."""


class DiscardMetrics:
    """Counts nothing: for a use case built without metrics (the composition root always
    gives one)."""

    def job_requested(self, *, duplicate: bool) -> None:
        return None

    def job_completed(self, *, seconds: float, rows: int, size_bytes: int) -> None:
        return None

    def job_failed(self, reason: FailureReason, *, seconds: float | None = None) -> None:
        return None

    def result_uploaded(self, seconds: float) -> None:
        return None

    def publish_failed(self, kind: MessageKind) -> None:
        return None

    def publish_retried(self, kind: MessageKind) -> None:
        return None

    def lease_expired(self) -> None:
        return None

    def job_reclaimed(self) -> None:
        return None

    def follower_lag(self, follower: str, notifications: int) -> None:
        return None

    def unroutable_held(self, kind: MessageKind, messages: int) -> None:
        return None

    def check_observed(self, dependency: str, status: str, milliseconds: float) -> None:
        return None

    def self_probe(self, dependency: str, *, up: bool) -> None:
        return None


NO_METRICS = DiscardMetrics()
