"""Group commit: the one writer of an event store.

Appends that arrive while a transaction is being written wait, then go together in the next
one. On PostgreSQL each inserting transaction takes the events table's lock (so notification
ids commit in order, which the log's followers rely on); one transaction for many appends takes
that lock, and flushes the WAL, once for all of them instead of once each. An append alone is
written at once. When one append of a batch conflicts, each is written again in a transaction
of its own, so only the conflicting one fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import RecordConflictError

from domain.errors import ConcurrencyConflict

Insert = Callable[[list[DomainEvent]], Awaitable[Sequence[int]]]
"""Inserts events in one transaction; their notification ids, in the order given. A version
already taken raises ``RecordConflictError`` and writes nothing."""

BATCH_LIMIT = 64
"""Most appends written in one transaction."""


class GroupCommit:
    """Writes appends through ``insert``, batched; tells ``committed`` after each transaction
    that committed at least one append (before those appends return)."""

    def __init__(self, insert: Insert, committed: Callable[[], None]) -> None:
        self._insert = insert
        self._committed = committed
        self._pending: list[tuple[list[DomainEvent], asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, events: Sequence[DomainEvent]) -> int:
        """The notification id of the last of ``events``, once committed;
        ``ConcurrencyConflict`` when one of their versions was taken first."""
        if not events:
            raise ValueError("append needs at least one event")
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((list(events), done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write_pending())
        try:
            return await asyncio.shield(done)
        except RecordConflictError as e:
            ids = ", ".join(sorted({str(ev.originator_id) for ev in events}))
            raise ConcurrencyConflict(f"another change was recorded first for {ids}") from e

    async def _write_pending(self) -> None:
        while self._pending:
            batch = self._pending[:BATCH_LIMIT]
            del self._pending[:BATCH_LIMIT]
            try:
                outcomes = await _append_batch([events for events, _ in batch], self._insert)
            except asyncio.CancelledError:
                for _, done in (*batch, *self._pending):
                    done.cancel()
                self._pending.clear()
                raise
            except Exception as error:
                outcomes = [error] * len(batch)
            for (_, done), outcome in zip(batch, outcomes, strict=True):
                if done.done():
                    continue
                if isinstance(outcome, BaseException):
                    done.set_exception(outcome)
                else:
                    done.set_result(outcome)
            if any(not isinstance(outcome, BaseException) for outcome in outcomes):
                self._committed()


async def _append_batch(
    batch: list[list[DomainEvent]], insert: Insert
) -> list[int | BaseException]:
    """Every append of ``batch`` in one transaction; when one of them conflicts (and so the
    whole transaction fails), each is written again in a transaction of its own. Each append's
    outcome: its last notification id, or its conflict."""
    if len(batch) > 1:
        try:
            ids = await insert([event for events in batch for event in events])
        except RecordConflictError:
            pass
        else:
            outcomes: list[int | BaseException] = []
            start = 0
            for events in batch:
                outcomes.append(max(ids[start : start + len(events)]))
                start += len(events)
            return outcomes
    outcomes = []
    for events in batch:
        try:
            outcomes.append(max(await insert(events)))
        except RecordConflictError as conflict:
            outcomes.append(conflict)
    return outcomes
