"""Following the event store's notification log (the outbox) from a tracked position."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.job_index import JobIndex
from application.ports.log_watch import LogWatch
from application.ports.metrics import NO_METRICS, RelayMetrics

log = logging.getLogger(__name__)

Handler = Callable[[LoggedEvent], Awaitable[None]]


@dataclass(slots=True, kw_only=True)
class _Loop:
    """Runs ``run_once`` until stopped: at once while there is work, else every
    ``poll_interval`` seconds or when woken; failures back off up to ``max_backoff``."""

    name: str
    poll_interval: float = 0.5
    max_backoff: float = 30.0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: RelayMetrics = NO_METRICS

    async def run_once(self) -> int:
        raise NotImplementedError

    async def measure_lag(self) -> None:
        """Reports how far behind the log this loop is (a follower of the log does)."""
        return None

    async def run(self, stop: asyncio.Event) -> None:
        """A failure is logged once when it starts (later retries at DEBUG), and the recovery
        once when a round succeeds again."""
        backoff = self.poll_interval
        failing = False
        while not stop.is_set():
            # Cleared before reading, so a wake that comes while reading is not lost.
            self.wake.clear()
            try:
                handled = await self.run_once()
                backoff = self.poll_interval
                if failing:
                    failing = False
                    log.info("%s: recovered", self.name)
            except Exception as error:
                log.log(
                    logging.DEBUG if failing else logging.WARNING,
                    "%s: failing, will retry with backoff: %s",
                    self.name,
                    error,
                )
                failing = True
                with contextlib.suppress(Exception):
                    await self.measure_lag()
                await _sleep_or(stop, backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            if handled == 0:
                await _sleep_or(stop, self.poll_interval, self.wake)


@dataclass(slots=True, kw_only=True)
class LogFollower(_Loop):
    """Hands every logged event, in order, to ``handle``, then records the position in the
    event store's tracking table: once per batch read, after the last event handled.

    The position is recorded after the effects, so an effect may repeat after a crash (at
    least once) but is never skipped: a failing event is retried with bounded backoff until it
    succeeds (the events before it in its batch are recorded as done first), and events the
    handler ignores still advance the position. Recording once per batch rather than once per
    event keeps a write to the tracking table out of the way between two events of a batch
    (a job's ``ResultStored`` and ``Completed`` come in one transaction).
    """

    store: JobEventStore
    handle: Handler
    batch: int = 100

    async def run_once(self) -> int:
        position = await self.store.position(self.name)
        logged = await self.store.read_log(position, self.batch)
        done = position
        try:
            for item in logged:
                await self.handle(item)
                done = item.notification_id
        except BaseException:
            # The events before the failing one are done; a failure to record that only
            # repeats them, and must not hide why the batch stopped.
            if done > position:
                with contextlib.suppress(Exception):
                    await self.store.advance(self.name, done)
            raise
        if done > position:
            await self.store.advance(self.name, done)
        await _report_lag(self, logged, self.batch)
        return len(logged)

    async def measure_lag(self) -> None:
        last = await self.store.last_notification_id()
        self.metrics.follower_lag(self.name, last - await self.store.position(self.name))


@dataclass(slots=True, kw_only=True)
class ProjectionFollower(_Loop):
    """Feeds batches of the log to the job projection, which records its own position in the
    same transaction as its rows (exactly once)."""

    store: JobEventStore
    index: JobIndex
    batch: int = 500

    async def run_once(self) -> int:
        logged: Sequence[LoggedEvent] = await self.store.read_log(
            await self.index.position(), self.batch
        )
        await self.index.project(logged)
        await _report_lag(self, logged, self.batch)
        return len(logged)

    async def measure_lag(self) -> None:
        last = await self.store.last_notification_id()
        self.metrics.follower_lag(self.name, last - await self.index.position())


@dataclass(slots=True, kw_only=True)
class PeriodicTask(_Loop):
    """Calls ``action`` every ``poll_interval`` seconds (it reports how much it did)."""

    action: Callable[[], Awaitable[int]]

    async def run_once(self) -> int:
        await self.action()
        return 0


@dataclass(slots=True, kw_only=True)
class WakeOnGrowth:
    """Wakes the ``followers`` whenever ``watch`` tells that the log grew, until stopped."""

    name: str
    watch: LogWatch
    followers: Sequence[_Loop]

    def wake_all(self) -> None:
        for follower in self.followers:
            follower.wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        await self.watch.run(stop, self.wake_all)


async def _report_lag(
    loop: LogFollower | ProjectionFollower, handled: Sequence[LoggedEvent], batch: int
) -> None:
    """After a batch: a short one read the log to its end, so nothing was left (0); after a
    full one, the log is asked how far it goes."""
    if len(handled) < batch:
        loop.metrics.follower_lag(loop.name, 0)
    else:
        await loop.measure_lag()


async def _sleep_or(stop: asyncio.Event, seconds: float, wake: asyncio.Event | None = None) -> None:
    waiters = [asyncio.ensure_future(stop.wait())]
    if wake is not None:
        waiters.append(asyncio.ensure_future(wake.wait()))
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
