"""Following the event store's notification log (the outbox) from a tracked position."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from eventsourcing.domain import DomainEvent

from application.errors import MessageUnroutable
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.job_index import JobIndex
from application.ports.log_watch import LogWatch
from application.ports.metrics import NO_METRICS, RelayMetrics

log = logging.getLogger(__name__)

Handler = Callable[[LoggedEvent], Awaitable[None]]
Interest = Callable[[DomainEvent], bool]
Observer = Callable[[LoggedEvent], None]

STOP_RECORD_TIMEOUT = 5.0
"""How long a stopping follower waits for its position to be recorded."""

RECORD_IGNORED_EVERY = 1000
"""A follower whose batches hold only events it ignores records its position once it moved
this far (in notification ids) past the recorded one, not after each batch."""


@dataclass(slots=True)
class _Read:
    """A read of the log about to begin: the followers that join it before it begins share
    its result."""

    after: int
    limit: int
    result: asyncio.Future[list[LoggedEvent]]


@dataclass(slots=True)
class SharedLogReads:
    """One read of the log for the followers that ask at about the same time (those woken
    by the same growth), instead of one read each.

    The first follower to ask opens a read and lets the event loop run once (or ``gather``
    seconds) before it begins; the followers that ask meanwhile join it, from the lowest of
    their positions. A read is only ever shared by followers that asked before it began, so
    each sees everything appended before its own round began, as a read of its own would."""

    store: JobEventStore
    limit: int = 500
    """Each read asks for at least this many events."""
    gather: float = 0.0
    """How long a read waits for more followers before it begins."""
    _next: _Read | None = None

    async def read(self, after: int, limit: int) -> tuple[list[LoggedEvent], bool]:
        """Events after ``after`` (at most ``limit``), in order, as ``store.read_log``; and
        whether they reach the end of the log as it was when the read began."""
        joined = self._next
        if joined is None:
            return await self._lead(after, limit)
        joined.after = min(joined.after, after)
        joined.limit = max(joined.limit, limit)
        try:
            logged = await asyncio.shield(joined.result)
        except asyncio.CancelledError:
            if not joined.result.cancelled():
                raise
            # The follower that led it stopped before it ended: read alone.
            return await _read_alone(self.store, after, limit)
        return await self._window(logged, joined, after, limit)

    async def _lead(self, after: int, limit: int) -> tuple[list[LoggedEvent], bool]:
        read = _Read(after, max(limit, self.limit), asyncio.get_running_loop().create_future())
        self._next = read
        try:
            try:
                await asyncio.sleep(self.gather)
            finally:
                if self._next is read:
                    self._next = None
            logged = await self.store.read_log(read.after, read.limit)
        except BaseException as error:
            if isinstance(error, Exception):
                read.result.set_exception(error)
                read.result.exception()  # retrieved here; the followers that joined get it
            else:
                read.result.cancel()
            raise
        read.result.set_result(logged)
        return await self._window(logged, read, after, limit)

    async def _window(
        self, logged: list[LoggedEvent], read: _Read, after: int, limit: int
    ) -> tuple[list[LoggedEvent], bool]:
        rest = [item for item in logged if item.notification_id > after]
        full = len(logged) >= read.limit
        if not rest and full:
            # The read ended before this follower's position (it began further back).
            return await _read_alone(self.store, after, limit)
        return rest[:limit], not full and len(rest) <= limit


@dataclass(slots=True, kw_only=True)
class _Loop:
    """Runs ``run_once`` until stopped: at once while there is work, else every
    ``poll_interval`` seconds or when woken; failures back off up to ``max_backoff``."""

    name: str
    poll_interval: float = 0.5
    max_backoff: float = 30.0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: RelayMetrics = NO_METRICS
    settle: float = 0.0
    """Once woken after waiting, how long to let more events come before reading: a longer
    settle reads bigger batches, less often, later."""
    caught_up: bool = field(default=False, init=False)
    """Set by ``run_once`` when what it read reached the end of the log (as it was when the
    read began): the loop then waits to be woken instead of reading again at once."""

    async def run_once(self) -> int:
        raise NotImplementedError

    async def measure_lag(self) -> None:
        """Reports how far behind the log this loop is (a follower of the log does)."""
        return None

    async def run(self, stop: asyncio.Event) -> None:
        """A failure is logged once when it starts (later retries at DEBUG), and the recovery
        once when a round succeeds again."""
        # Not a retry library's loop: it runs for the process's life, waits on wake-ups as well
        # as after failures, and logs a failure and its recovery once each.
        backoff = self.poll_interval
        failing = False
        while not stop.is_set():
            # Cleared before reading, so a wake that comes while reading is not lost, and a
            # round that read to the end of the log can wait for the next one.
            self.wake.clear()
            self.caught_up = False
            try:
                handled = await self.run_once()
                backoff = self.poll_interval
                if failing:
                    failing = False
                    log.info("%s: recovered", self.name)
            except Exception as error:
                # An unroutable message was told by its publisher (once, with the fix).
                quiet = failing or isinstance(error, MessageUnroutable)
                log.log(
                    logging.DEBUG if quiet else logging.WARNING,
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
            if handled == 0 or self.caught_up:
                await _sleep_or(stop, self.idle_wait(), self.wake)
                if self.settle > 0:
                    await _sleep_or(stop, self.settle)
        await self.stopped()

    def idle_wait(self) -> float:
        """How long to wait, when there is nothing to read, before reading anyway."""
        return self.poll_interval

    async def stopped(self) -> None:
        """Called once the loop stopped."""
        return None


@dataclass(slots=True, kw_only=True)
class LogFollower(_Loop):
    """Hands every logged event it is ``interested`` in, in order, to ``handle``, then records
    the position in the event store's tracking table: once per batch read, after the last event
    handled.

    The position is recorded after the effects, so an effect may repeat after a crash (at
    least once) but is never skipped: a failing event is retried with bounded backoff until it
    succeeds (the events before it in its batch are recorded as done first), and events the
    handler ignores still advance the position. Recording once per batch rather than once per
    event keeps a write to the tracking table out of the way between two events of a batch
    (a job's ``ResultStored`` and ``Completed`` come in one transaction). With a
    ``record_delay``, the position after an effect is recorded at most that many seconds
    later, for all the batches handled meanwhile (a crash repeats at most those effects). A
    batch of events it ignores only is recorded once the position moved
    ``record_ignored_every`` past the recorded one (or when the loop stops): after a crash
    those are read and ignored again.

    The position is read from the store once and then kept in memory, which is right while no
    other process advances it. Several relays may run: a position recorded first by another
    one (the store refuses ours) or any failure makes this follower read it again; until then
    it may handle again events another relay handled, which at least once allows.
    """

    store: JobEventStore
    handle: Handler
    interested: Interest | None = None
    """Which events ``handle`` acts on (None: all); the others are skipped without a call."""
    observe: Observer | None = None
    """Shown every event read, in order, before it is handled or skipped (cheap, no I/O)."""
    batch: int = 100
    reads: SharedLogReads | None = None
    record_ignored_every: int = RECORD_IGNORED_EVERY
    record_delay: float = 0.0
    _position: int | None = None
    """Where this follower is, when known: recorded, or handled past the record."""
    _recorded: int = 0
    _owed_since: float | None = None
    """When the first effect not recorded yet was made (the event loop's clock)."""

    async def run_once(self) -> int:
        position = self._position
        if position is None:
            position = self._recorded = await self.store.position(self.name)
            self._position = position
        logged, at_end = await _read(self.store, self.reads, position, self.batch)
        done = position
        acted = False
        try:
            for item in logged:
                if self.observe is not None:
                    self.observe(item)
                if self.interested is None or self.interested(item.event):
                    acted = True
                    await self.handle(item)
                done = item.notification_id
        except BaseException:
            # The events before the failing one are done; a failure to record that only
            # repeats them, and must not hide why the batch stopped. The position is read
            # again before the retry.
            self._position = None
            self._owed_since = None
            if done > self._recorded:
                with contextlib.suppress(Exception):
                    await self.store.advance(self.name, done)
            raise
        self._position = done
        if acted and self._owed_since is None:
            self._owed_since = asyncio.get_running_loop().time()
        if done > self._recorded and (
            self._record_due() or done - self._recorded >= self.record_ignored_every
        ):
            await self._record(done)
        await _report_lag(self, at_end)
        return len(logged)

    def _record_due(self) -> bool:
        owed = self._owed_since
        return owed is not None and (
            self.record_delay <= 0 or asyncio.get_running_loop().time() - owed >= self.record_delay
        )

    def idle_wait(self) -> float:
        owed = self._owed_since
        if owed is None:
            return self.poll_interval
        left = owed + self.record_delay - asyncio.get_running_loop().time()
        return min(self.poll_interval, max(left, 0.0))

    async def _record(self, done: int) -> None:
        self._position = None
        self._owed_since = None
        if await self.store.advance(self.name, done):
            self._position = self._recorded = done

    async def stopped(self) -> None:
        """Records what was handled past the record; a store that does not answer soon is
        not waited for (the events are handled again after the restart)."""
        position = self._position
        if position is not None and position > self._recorded:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._record(position), STOP_RECORD_TIMEOUT)

    async def measure_lag(self) -> None:
        last = await self.store.last_notification_id()
        position = self._position
        if position is None:
            position = await self.store.position(self.name)
        self.metrics.follower_lag(self.name, last - position)


@dataclass(slots=True, kw_only=True)
class ProjectionFollower(_Loop):
    """Feeds batches of the log to the job projection, which records its own position in the
    same transaction as its rows (exactly once).

    The position the projection answers is kept in memory between batches and passed back
    with the next one, which the projection checks in its transaction: when another process
    projected meanwhile, it skips what it already has and answers where it is now."""

    store: JobEventStore
    index: JobIndex
    batch: int = 500
    reads: SharedLogReads | None = None
    _position: int | None = None

    async def run_once(self) -> int:
        position = self._position
        if position is None:
            position = self._position = await self.index.position()
        logged, at_end = await _read(self.store, self.reads, position, self.batch)
        if logged:
            self._position = None
            self._position = await self.index.project(logged, after=position)
        await _report_lag(self, at_end)
        return len(logged)

    async def measure_lag(self) -> None:
        last = await self.store.last_notification_id()
        position = self._position
        if position is None:
            position = await self.index.position()
        self.metrics.follower_lag(self.name, last - position)


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


async def _read(
    store: JobEventStore, reads: SharedLogReads | None, after: int, limit: int
) -> tuple[list[LoggedEvent], bool]:
    if reads is None:
        return await _read_alone(store, after, limit)
    return await reads.read(after, limit)


async def _read_alone(
    store: JobEventStore, after: int, limit: int
) -> tuple[list[LoggedEvent], bool]:
    logged = await store.read_log(after, limit)
    return logged, len(logged) < limit


async def _report_lag(loop: LogFollower | ProjectionFollower, at_end: bool) -> None:
    """After a batch: one that read the log to its end left nothing (0); otherwise, the log
    is asked how far it goes."""
    loop.caught_up = at_end
    if at_end:
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
