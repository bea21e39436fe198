from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from eventsourcing.domain import DomainEvent

from application.ports.log_watch import AppendSignal
from domain.dedup import RequestSlotTaken
from domain.job import JobEvent


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event with its position in the store's totally ordered notification log."""

    notification_id: int
    event: DomainEvent


class JobEventStore(Protocol):
    """Append-only store of job and request-slot events; its notification log is the outbox.

    Contract:
    - ``append`` records all given events in one transaction or none of them. Uniqueness of
      (originator id, version) is the optimistic lock: a clash raises
      ``domain.errors.ConcurrencyConflict`` and nothing is written. Returns the notification id
      of the last event written.
    - ``read_log`` returns events with notification ids greater than ``after``, ascending, at
      most ``limit``. Every appended event appears in the log exactly once.
    - ``last_notification_id`` is the id of the newest event in the log (0 when empty).
    - ``position``/``advance`` keep one tracked position per follower name; ``advance`` never
      moves a position backwards: it answers False (and records nothing) when that position or
      a later one was recorded first, True when it recorded it.
    - ``appended`` is told once for every transaction that committed events, after they are
      readable in the log and before the ``append`` calls it answers return (never for an
      append that failed); it hears only this store's appends, not other processes'.
    - Unavailability raises ``domain.errors.Unavailable``. All methods are safe to call from the
      event loop (the implementation never blocks it).
    """

    appended: AppendSignal
    """This store's commits, told in this process (the followers wake on it)."""

    async def job_events(self, job_id: UUID) -> list[JobEvent]: ...

    async def slot_events(self, slot_id: UUID) -> list[RequestSlotTaken]: ...

    async def append(self, events: Sequence[DomainEvent]) -> int: ...

    async def read_log(self, after: int, limit: int) -> list[LoggedEvent]: ...

    async def last_notification_id(self) -> int: ...

    async def position(self, follower: str) -> int: ...

    async def advance(self, follower: str, notification_id: int) -> bool: ...

    async def check(self) -> None:
        """Readiness probe: raises ``Unavailable`` when the store cannot be reached."""
        ...

    async def close(self) -> None: ...
