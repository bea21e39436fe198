"""A claim's lease, kept alive by a heartbeat while its worker works.

The lease recorded with ``JobClaimed`` is short (``RunLimits.lease``); the worker's heartbeat
renews it every ``heartbeat`` seconds in the ``JobLeases`` row, in place, so a long job adds no
events and a dead worker's claim ends one lease after its last beat. A worker that learns its
lease went to another claim stops at once; it confirms its lease before making its result
visible and before recording it, so a worker that lost its lease records nothing.
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
    """Keeps the lease of one claim: ``attempt`` of ``job_id`` by ``worker_id``."""

    leases: JobLeases
    clock: Clock
    job_id: UUID
    attempt: int
    worker_id: str
    lease: timedelta
    heartbeat: float
    lost: bool = False
    _unreachable: bool = field(default=False, init=False)

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
        """Renews the lease now; raises ``LeaseLost`` if another claim holds it, and
        ``Unavailable`` when that cannot be known."""
        if self.lost or not await self._renew():
            self.lost = True
            raise LeaseLost()

    async def release(self) -> None:
        """Hands the claim back: its lease ends now, so another worker may take it at once."""
        with contextlib.suppress(Unavailable):
            await self.leases.release(self.job_id, self.attempt, self.worker_id, self.clock.now())

    async def _renew(self) -> bool:
        until = self.clock.now() + self.lease
        return await self.leases.renew(self.job_id, self.attempt, self.worker_id, until)

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
