"""Chains job events as they are recorded: each stored state gets ``prev_digest`` and
``digest`` (``domain.audit_chain``). The digest of a job's newest event is remembered, so the
usual read-then-append needs no extra read; otherwise the previous event is read once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.audit_chain import (
    GENESIS,
    JOB_TOPIC_PREFIX,
    Record,
    link,
    record_digest,
    split_linked,
)

PreviousReader = Callable[[UUID, int], StoredEvent | None]
"""Reads the stored event of (job id, version), or None when there is none."""


def stored_record(stored: StoredEvent, position: int = 0) -> Record:
    return Record(
        position=position,
        originator_id=str(stored.originator_id),
        version=int(stored.originator_version),
        topic=stored.topic,
        state=bytes(stored.state),
    )


def digest_of(stored: StoredEvent) -> str:
    """The digest an event carries, or for one recorded before chaining, of its content."""
    _, carried = split_linked(bytes(stored.state))
    return carried if carried is not None else record_digest(stored_record(stored))


class Chainer:
    """Links job events into their chain before they are inserted; thread-safe; remembers
    ``capacity`` heads."""

    def __init__(self, capacity: int = 4096) -> None:
        self._heads: OrderedDict[UUID, tuple[int, str]] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def link(
        self, events: Sequence[StoredEvent], previous: PreviousReader
    ) -> tuple[list[StoredEvent], dict[UUID, tuple[int, str]]]:
        """The events with job events linked, and the jobs' new heads (to ``remember_heads``
        once the insert succeeded)."""
        linked: list[StoredEvent] = []
        batch: dict[UUID, tuple[int, str]] = {}
        for stored in events:
            if not stored.topic.startswith(JOB_TOPIC_PREFIX):
                linked.append(stored)
                continue
            job_id = stored.originator_id
            assert isinstance(job_id, UUID)
            version = int(stored.originator_version)
            prev = self._prev(job_id, version, batch, previous)
            state, digest = link(str(job_id), version, stored.topic, bytes(stored.state), prev)
            batch[job_id] = (version, digest)
            linked.append(StoredEvent(job_id, version, stored.topic, state))
        return linked, batch

    def unknown_previous(self, events: Sequence[StoredEvent]) -> list[tuple[UUID, int]]:
        """The (job id, version) of each event ``link`` would have to read for ``events``:
        the predecessors neither earlier in ``events`` nor remembered (for a reader that
        fetches them first, asynchronously)."""
        batch: dict[UUID, int] = {}
        unknown: list[tuple[UUID, int]] = []
        for stored in events:
            if not stored.topic.startswith(JOB_TOPIC_PREFIX):
                continue
            job_id = stored.originator_id
            assert isinstance(job_id, UUID)
            version = int(stored.originator_version)
            if version > 1 and batch.get(job_id) != version - 1:
                head = self._head(job_id)
                if head is None or head[0] != version - 1:
                    unknown.append((job_id, version - 1))
            batch[job_id] = version
        return unknown

    def _prev(
        self,
        job_id: UUID,
        version: int,
        batch: dict[UUID, tuple[int, str]],
        previous: PreviousReader,
    ) -> str:
        if version <= 1:
            return GENESIS
        for known in (batch.get(job_id), self._head(job_id)):
            if known is not None and known[0] == version - 1:
                return known[1]
        stored = previous(job_id, version - 1)
        # With no previous event the insert is refused (or the gap shows when verifying).
        return GENESIS if stored is None else digest_of(stored)

    def _head(self, job_id: UUID) -> tuple[int, str] | None:
        with self._lock:
            return self._heads.get(job_id)

    def remember_read(self, events: Sequence[StoredEvent]) -> None:
        """A job's events as read: the newest one is the head to link to next."""
        if events and events[-1].topic.startswith(JOB_TOPIC_PREFIX):
            newest = events[-1]
            assert isinstance(newest.originator_id, UUID)
            self.remember_heads(
                {newest.originator_id: (int(newest.originator_version), digest_of(newest))}
            )

    def remember_heads(self, heads: Mapping[UUID, tuple[int, str]]) -> None:
        with self._lock:
            for job_id, head in heads.items():
                known = self._heads.get(job_id)
                if known is not None and known[0] >= head[0]:
                    continue
                self._heads[job_id] = head
                self._heads.move_to_end(job_id)
            while len(self._heads) > self._capacity:
                self._heads.popitem(last=False)
