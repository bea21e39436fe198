"""``LeaseKeeper`` and the lease rules line by line, against a scripted ``JobLeases``: when a
lease is trusted without a round trip, what a renewal writes, what the heartbeat does when the
database is away or another claim took the lease, and when a lease counts as ended."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from uuid import UUID

import pytest

from application.jobs.lease import LeaseKeeper, LeaseLost, lease_ends, lease_expired
from application.ports.job_leases import LeaseHold
from domain import job as jobs
from domain.errors import Unavailable
from domain.job import Job
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT
from tests.support.twins import FakeClock

JOB = UUID(int=7)
LEASE = timedelta(seconds=20)


class ScriptedLeases:
    """``renew`` answers from ``answers`` (True when empty); an ``Unavailable`` in it is
    raised. Every call is recorded."""

    def __init__(self, *answers: bool | Unavailable) -> None:
        self.answers = list(answers)
        self.renewed: list[tuple[UUID, int, str, datetime]] = []
        self.released: list[tuple[UUID, int, str, datetime]] = []
        self.release_error: Unavailable | None = None
        self.called = asyncio.Event()

    async def take(self, *args: object) -> bool:
        raise AssertionError("the keeper never takes a lease")

    async def renew(self, job_id: UUID, attempt: int, worker_id: str, until: datetime) -> bool:
        self.renewed.append((job_id, attempt, worker_id, until))
        self.called.set()
        answer = self.answers.pop(0) if self.answers else True
        if isinstance(answer, Unavailable):
            raise answer
        return answer

    async def release(self, job_id: UUID, attempt: int, worker_id: str, now: datetime) -> None:
        self.released.append((job_id, attempt, worker_id, now))
        if self.release_error is not None:
            raise self.release_error

    async def hold(self, job_id: UUID) -> LeaseHold | None:
        return None


def _keeper(
    leases: ScriptedLeases,
    clock: FakeClock,
    *,
    fresh_for: timedelta = timedelta(seconds=5),
    held: bool = True,
    heartbeat: float = 0.01,
) -> LeaseKeeper:
    return LeaseKeeper(
        leases=leases, clock=clock, job_id=JOB, attempt=3, worker_id="w1", lease=LEASE,
        heartbeat=heartbeat, held_at=clock.now() if held else None, fresh_for=fresh_for,
    )  # fmt: skip


# --- trust without a round trip


@pytest.mark.parametrize("fresh_for", [timedelta(0), LEASE / 2])
def test_a_lease_is_trusted_for_between_nothing_and_half_of_it(fresh_for: timedelta) -> None:
    _keeper(ScriptedLeases(), FakeClock(), fresh_for=fresh_for)


@pytest.mark.parametrize(
    "fresh_for", [LEASE / 2 + timedelta(microseconds=1), timedelta(seconds=-1)]
)
def test_trusting_a_lease_longer_than_half_or_negatively_is_refused(fresh_for: timedelta) -> None:
    with pytest.raises(ValueError, match="at most half"):
        _keeper(ScriptedLeases(), FakeClock(), fresh_for=fresh_for)


def test_fresh_only_strictly_within_fresh_for_of_the_last_hold() -> None:
    clock = FakeClock()
    keeper = _keeper(ScriptedLeases(), clock)
    assert keeper.fresh()
    clock.advance(seconds=4.999)
    assert keeper.fresh()
    clock.advance(seconds=0.001)
    assert not keeper.fresh()  # exactly fresh_for after: no longer
    clock.advance(seconds=-10)
    assert not keeper.fresh()  # a clock that went back is not trusted


def test_never_fresh_without_a_hold_or_without_trust() -> None:
    clock = FakeClock()
    assert not _keeper(ScriptedLeases(), clock, held=False).fresh()
    assert not _keeper(ScriptedLeases(), clock, fresh_for=timedelta(0)).fresh()


async def test_confirming_a_fresh_lease_asks_nothing() -> None:
    leases = ScriptedLeases()
    await _keeper(leases, FakeClock()).confirm()
    assert leases.renewed == []


async def test_confirming_a_stale_lease_renews_it_until_one_lease_from_now() -> None:
    clock, leases = FakeClock(), ScriptedLeases()
    keeper = _keeper(leases, clock)
    clock.advance(seconds=6)
    await keeper.confirm()
    assert leases.renewed == [(JOB, 3, "w1", clock.now() + LEASE)]
    assert keeper.held_at == clock.now() and not keeper.lost
    await keeper.confirm()  # fresh again: no second round trip
    assert len(leases.renewed) == 1


async def test_a_renewal_refused_loses_the_lease_for_good() -> None:
    clock, leases = FakeClock(), ScriptedLeases(False)
    keeper = _keeper(leases, clock, held=False)
    with pytest.raises(LeaseLost):
        await keeper.confirm()
    assert keeper.lost and keeper.held_at is None
    with pytest.raises(LeaseLost):
        await keeper.confirm()  # lost: not asked again
    assert len(leases.renewed) == 1


async def test_a_lost_lease_is_never_trusted_even_when_fresh() -> None:
    leases = ScriptedLeases()
    keeper = _keeper(leases, FakeClock())
    keeper.lost = True
    with pytest.raises(LeaseLost):
        await keeper.confirm()
    assert leases.renewed == []


async def test_a_renewal_the_database_cannot_answer_is_unavailable_not_lost() -> None:
    keeper = _keeper(ScriptedLeases(Unavailable("down")), FakeClock(), held=False)
    with pytest.raises(Unavailable):
        await keeper.confirm()
    assert not keeper.lost


async def test_release_ends_the_lease_now_and_forgets_the_hold() -> None:
    clock, leases = FakeClock(), ScriptedLeases()
    keeper = _keeper(leases, clock)
    await keeper.release()
    assert leases.released == [(JOB, 3, "w1", clock.now())]
    assert keeper.held_at is None and not keeper.fresh()
    leases.release_error = Unavailable("down")
    await keeper.release()  # the lease then ends on its own: nothing to report


# --- the heartbeat


async def _renewals(leases: ScriptedLeases, count: int, seconds: float = 2.0) -> None:
    """Waits until ``leases`` was asked to renew ``count`` times."""
    async with asyncio.timeout(seconds):
        while len(leases.renewed) < count:
            leases.called.clear()
            await leases.called.wait()


async def test_the_heartbeat_renews_every_beat_while_the_block_runs() -> None:
    clock, leases = FakeClock(), ScriptedLeases()
    keeper = _keeper(leases, clock, heartbeat=0.02)
    async with keeper.kept():
        await asyncio.sleep(0.005)
        assert leases.renewed == []  # the first beat comes one heartbeat in
        await _renewals(leases, 3)
    count = len(leases.renewed)
    await asyncio.sleep(0.06)
    assert len(leases.renewed) == count  # the heartbeat stopped with the block
    assert all(until == clock.now() + LEASE for *_, until in leases.renewed)


async def test_losing_the_lease_cancels_the_block_and_raises_lease_lost(caplog) -> None:
    leases = ScriptedLeases(True, False)
    keeper = _keeper(leases, FakeClock())
    reached_end = False
    with caplog.at_level(logging.WARNING, logger="application.jobs.lease"):
        with pytest.raises(LeaseLost):
            async with keeper.kept():
                await asyncio.sleep(5)
                reached_end = True
    assert not reached_end and keeper.lost
    assert len(leases.renewed) == 2  # no beat after the refusal
    assert [r.getMessage() for r in caplog.records] == ["job.lease.lost"]


async def test_a_block_that_ends_after_the_lease_was_lost_still_raises() -> None:
    keeper = _keeper(ScriptedLeases(), FakeClock())
    with pytest.raises(LeaseLost):
        async with keeper.kept():
            keeper.lost = True


async def test_a_timeout_inside_the_block_is_not_taken_for_a_lost_lease() -> None:
    keeper = _keeper(ScriptedLeases(), FakeClock(), heartbeat=10)
    with pytest.raises(TimeoutError):
        async with keeper.kept():
            raise TimeoutError
    assert not keeper.lost


async def test_an_outage_is_warned_once_and_its_end_told_once(caplog) -> None:
    down = Unavailable("down")
    leases = ScriptedLeases(down, down, down, True, True)
    keeper = _keeper(leases, FakeClock())
    with caplog.at_level(logging.INFO, logger="application.jobs.lease"):
        async with keeper.kept():
            await _renewals(leases, 5)
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert messages == [("WARNING", "job.lease.unrenewed"), ("INFO", "job.lease.renewed")]
    assert not keeper.lost


# --- when a lease ends


def _claimed(attempts: int = 1) -> tuple[Job, datetime]:
    clock = FakeClock()
    request = ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "p"})
    job = jobs.apply(jobs.request_job(JOB, request, clock.now(), tenant=SINGLE_TENANT), None)
    for _ in range(attempts):
        job = jobs.apply(jobs.claim(job, "w1", clock.now(), LEASE), job)
    assert job.lease_until is not None
    return job, job.lease_until


def test_a_row_of_the_current_or_a_newer_claim_decides_when_the_lease_ends() -> None:
    job, recorded = _claimed()
    later = recorded + timedelta(minutes=5)
    assert lease_ends(job, None) == recorded
    assert lease_ends(job, LeaseHold(JOB, job.attempts, "w1", later)) == later
    assert lease_ends(job, LeaseHold(JOB, job.attempts + 1, "w2", later)) == later
    assert lease_ends(job, LeaseHold(JOB, job.attempts - 1, "w0", later)) == recorded


def test_a_job_not_claimed_has_no_lease() -> None:
    request = ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "p"})
    pending = jobs.apply(
        jobs.request_job(JOB, request, FakeClock().now(), tenant=SINGLE_TENANT), None
    )
    assert lease_ends(pending, None) is None
    assert not lease_expired(pending, None, FakeClock().now() + timedelta(days=1))


def test_a_lease_has_expired_at_its_end_not_before() -> None:
    job, ends = _claimed()
    assert not lease_expired(job, None, ends - timedelta(microseconds=1))
    assert lease_expired(job, None, ends)
    assert lease_expired(job, None, ends + timedelta(seconds=1))


def test_a_keeper_trusts_nothing_unless_told_how_long() -> None:
    clock = FakeClock()
    keeper = LeaseKeeper(
        leases=ScriptedLeases(), clock=clock, job_id=JOB, attempt=1, worker_id="w1",
        lease=LEASE, heartbeat=1.0, held_at=clock.now(),
    )  # fmt: skip
    assert not keeper.fresh()


async def test_a_heartbeat_without_an_outage_logs_nothing(caplog) -> None:
    leases = ScriptedLeases()
    keeper = _keeper(leases, FakeClock())
    with caplog.at_level(logging.DEBUG, logger="application.jobs.lease"):
        async with keeper.kept():
            await _renewals(leases, 2)
    assert caplog.records == []


async def test_the_blocks_own_timeout_is_its_own_even_once_the_lease_was_lost() -> None:
    keeper = _keeper(ScriptedLeases(False), FakeClock(), fresh_for=timedelta(0), heartbeat=10)
    with pytest.raises(TimeoutError):
        async with keeper.kept():
            with pytest.raises(LeaseLost):
                await keeper.confirm()
            raise TimeoutError
