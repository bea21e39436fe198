"""A claim's lease, kept alive by a heartbeat while its worker works.

The lease recorded with ``JobClaimed`` is short (``RunLimits.lease``); the worker's heartbeat
renews it every ``heartbeat`` seconds in the ``JobLeases`` row, in place, so a long job adds no
events and a dead worker's claim ends one lease after its last beat. A worker that learns its
lease went to another claim stops at once; it confirms its lease before making its result
visible and before recording it, so a worker that lost its lease records nothing.

A lease this worker took or renewed less than ``fresh_for`` ago (a fraction of the lease) is
still its own: no other worker may take it before it ends, which is later than that by most of
a lease. Confirming such a lease is answered without asking the database, so a short job's
confirmations cost no round trips. Recording still appends at the stream version the claim
read, so a claim another worker recorded meanwhile makes the record fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from application.ports.clock import Clock
from application.ports.job_leases import JobLeases, LeaseHold
from domain.errors import Unavailable
from domain.job import Job, Phase

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another claim holds the job's lease now: this worker's work on it is void."""


def lease_ends(job: Job, hold: LeaseHold | None) -> datetime | None:
    """When the lease on ``job`` ends: as renewed in its row when the row belongs to the
    current claim (or to a newer one not yet recorded), else as recorded with the claim;
    None when nothing holds the job."""
    if hold is not None and hold.attempt >= job.attempts:
        return hold.until
    return job.lease_until if job.phase is Phase.CLAIMED else None


def lease_expired(job: Job, hold: LeaseHold | None, now: datetime) -> bool:
    """Whether the job's current claim has a lease that ended by ``now``."""
    ends = lease_ends(job, hold)
    return job.phase is Phase.CLAIMED and ends is not None and ends <= now


@dataclass(slots=True)
class LeaseKeeper:
    """Keeps the lease of one claim: ``attempt`` of ``job_id`` by ``worker_id``.

    ``held_at`` is when the lease was last taken or renewed by this worker (the clock read
    before the statement, so the lease it wrote ends one ``lease`` after it, or later);
    ``fresh_for`` how long after that ``confirm`` trusts it without a round trip (zero:
    never)."""

    leases: JobLeases
    clock: Clock
    job_id: UUID
    attempt: int
    worker_id: str
    lease: timedelta
    heartbeat: float
    held_at: datetime | None = None
    fresh_for: timedelta = timedelta(0)
    lost: bool = False
    _unreachable: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not timedelta(0) <= self.fresh_for <= self.lease / 2:
            raise ValueError("a lease is trusted for at most half of it")

    @contextlib.asynccontextmanager
    async def kept(self) -> AsyncIterator[None]:
        """Renews the lease while the block runs; if the lease is lost, the block is
        cancelled and ``LeaseLost`` raised instead."""
        try:
            async with asyncio.timeout(None) as deadline:
                beating = asyncio.create_task(self._beat(deadline))
                try:
                    yield
                finally:
                    beating.cancel()
                    await asyncio.gather(beating, return_exceptions=True)
        except TimeoutError:
            if self.lost and deadline.expired():
                raise LeaseLost() from None
            raise
        if self.lost:
            raise LeaseLost()

    async def confirm(self) -> None:
        """Makes sure this claim holds the lease: renews it now unless it was taken or renewed
        less than ``fresh_for`` ago; raises ``LeaseLost`` if another claim holds it, and
        ``Unavailable`` when that cannot be known."""
        if self.lost:
            raise LeaseLost()
        if self.fresh():
            return
        if not await self._renew():
            self.lost = True
            raise LeaseLost()

    def fresh(self) -> bool:
        """Whether the lease was taken or renewed by this worker less than ``fresh_for`` ago."""
        if self.held_at is None or not self.fresh_for:
            return False
        return timedelta(0) <= self.clock.now() - self.held_at < self.fresh_for

    async def release(self) -> None:
        """Hands the claim back: its lease ends now, so another worker may take it at once."""
        self.held_at = None
        with contextlib.suppress(Unavailable):
            await self.leases.release(self.job_id, self.attempt, self.worker_id, self.clock.now())

    async def _renew(self) -> bool:
        now = self.clock.now()
        held = await self.leases.renew(self.job_id, self.attempt, self.worker_id, now + self.lease)
        if held:
            self.held_at = now
        return held

    async def _beat(self, deadline: asyncio.Timeout) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                held = await self._renew()
            except Unavailable:
                if not self._unreachable:
                    log.warning("job.lease.unrenewed", extra={"reason": "database unavailable"})
                self._unreachable = True
                continue
            if self._unreachable:
                log.info("job.lease.renewed", extra={"reason": "database available again"})
                self._unreachable = False
            if not held:
                self.lost = True
                log.warning("job.lease.lost", extra={"reason": "claimed by another worker"})
                deadline.reschedule(asyncio.get_running_loop().time())
                return
