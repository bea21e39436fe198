"""In-process twin of the job event store, for unit tests: deterministic, no threads, no I/O."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Sequence
from typing import TypeVar
from uuid import UUID

from eventsourcing.domain import DomainEvent

from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.log_watch import AppendSignal
from domain.dedup import RequestSlotTaken
from domain.errors import ConcurrencyConflict, Unavailable
from domain.job import JobEvent

T = TypeVar("T")


class InMemoryJobEventStore(JobEventStore):
    """Same contract as the real store: atomic appends, unique (originator id, version),
    notification ids 1, 2, 3… in commit order, one never-decreasing position per follower.

    Events are deep-copied in and out, so callers cannot alter what was recorded.
    Set ``unavailable = True`` to make every call raise ``Unavailable``.

    With ``interleave=True`` the store hands control back to the event loop once in every read
    (after taking its snapshot) and in every append (before committing), as the real store does
    while its database works: concurrent tasks can then read the same version and race on the
    append, which the loser sees as ``ConcurrencyConflict``. Scheduling stays deterministic.
    ``conflicts`` counts the appends refused that way.
    """

    def __init__(self, *, interleave: bool = False) -> None:
        self._log: list[DomainEvent] = []
        self._by_originator: dict[UUID, dict[int, int]] = {}
        self._positions: dict[str, int] = {}
        self._lock = threading.Lock()
        self.unavailable = False
        self._closed = False
        self.appended = AppendSignal()
        self.interleave = interleave
        self.conflicts = 0

    def _guard(self) -> None:
        if self._closed:
            raise Unavailable("the event store is closed")
        if self.unavailable:
            raise Unavailable()

    async def _pause(self) -> None:
        if self.interleave:
            await asyncio.sleep(0)

    async def append(self, events: Sequence[DomainEvent]) -> int:
        self._guard()
        if not events:
            raise ValueError("append needs at least one event")
        await self._pause()
        self._guard()
        with self._lock:
            keys = [(e.originator_id, e.originator_version) for e in events]
            clash = len(set(keys)) < len(keys) or any(
                version in self._by_originator.get(oid, {}) for oid, version in keys
            )
            if clash:
                self.conflicts += 1
                ids = ", ".join(sorted({str(oid) for oid, _ in keys}))
                raise ConcurrencyConflict(f"another change was recorded first for {ids}")
            for event in events:
                self._log.append(copy.deepcopy(event))
                versions = self._by_originator.setdefault(event.originator_id, {})
                versions[event.originator_version] = len(self._log)
            last = len(self._log)
        self.appended.notify()
        return last

    async def job_events(self, job_id: UUID) -> list[JobEvent]:
        events = self._select(job_id, JobEvent)
        await self._pause()
        return events

    async def slot_events(self, slot_id: UUID) -> list[RequestSlotTaken]:
        events = self._select(slot_id, RequestSlotTaken)
        await self._pause()
        return events

    def _select(self, originator_id: UUID, kind: type[T]) -> list[T]:
        self._guard()
        with self._lock:
            versions = self._by_originator.get(originator_id, {})
            events = [self._log[versions[v] - 1] for v in sorted(versions)]
        out: list[T] = []
        for event in events:
            if not isinstance(event, kind):
                raise TypeError(f"{originator_id} holds a {type(event).__name__}")
            out.append(copy.deepcopy(event))
        return out

    async def read_log(self, after: int, limit: int) -> list[LoggedEvent]:
        self._guard()
        if limit <= 0:
            return []
        start = max(after, 0)
        with self._lock:
            window = self._log[start : start + limit]
        logged = [LoggedEvent(start + i + 1, copy.deepcopy(e)) for i, e in enumerate(window)]
        await self._pause()
        return logged

    async def last_notification_id(self) -> int:
        self._guard()
        with self._lock:
            return len(self._log)

    async def position(self, follower: str) -> int:
        self._guard()
        _check_follower(follower)
        return self._positions.get(follower, 0)

    async def advance(self, follower: str, notification_id: int) -> bool:
        self._guard()
        _check_follower(follower)
        with self._lock:
            if notification_id > self._positions.get(follower, 0):
                self._positions[follower] = notification_id
                return True
            return False

    async def check(self) -> None:
        self._guard()

    async def close(self) -> None:
        self._closed = True


def _check_follower(follower: str) -> None:
    if not follower or follower == "__migration__":
        raise ValueError(f"invalid follower name {follower!r}")
