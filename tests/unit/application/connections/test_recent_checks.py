from __future__ import annotations

import asyncio

import pytest

from application.connections.recent_checks import RecentChecks
from tests.support.twins import FakeClock


class Check:
    def __init__(self) -> None:
        self.runs = 0
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> None:
        self.runs += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise ConnectionError("down")


async def test_a_check_that_passed_is_not_run_again_within_its_window():
    clock, check = FakeClock(), Check()
    checks = RecentChecks(5, clock)
    await checks.run("a", check)
    clock.advance(seconds=4.9)
    await checks.run("a", check)
    assert check.runs == 1
    clock.advance(seconds=0.1)
    await checks.run("a", check)
    assert check.runs == 2


async def test_a_failure_is_not_remembered():
    clock, check = FakeClock(), Check()
    checks = RecentChecks(5, clock)
    check.fail = True
    with pytest.raises(ConnectionError):
        await checks.run("a", check)
    with pytest.raises(ConnectionError):
        await checks.run("a", check)
    check.fail = False
    await checks.run("a", check)
    assert check.runs == 3


async def test_each_key_is_checked_on_its_own():
    clock, check = FakeClock(), Check()
    checks = RecentChecks(5, clock)
    await checks.run(("tenant-a", "conn", 1), check)
    await checks.run(("tenant-b", "conn", 1), check)
    await checks.run(("tenant-a", "conn", 2), check)
    assert check.runs == 3


async def test_concurrent_callers_share_one_run_and_its_failure():
    clock, check = FakeClock(), Check()
    checks = RecentChecks(0, clock)
    check.gate, check.fail = asyncio.Event(), True
    callers = [asyncio.ensure_future(checks.run("a", check)) for _ in range(10)]
    await asyncio.sleep(0)
    check.gate.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert check.runs == 1
    assert all(isinstance(r, ConnectionError) for r in results)


async def test_a_zero_window_checks_every_time():
    clock, check = FakeClock(), Check()
    checks = RecentChecks(0, clock)
    await checks.run("a", check)
    await checks.run("a", check)
    assert check.runs == 2


async def test_a_cancelled_caller_does_not_cancel_the_run_others_wait_for():
    clock, check = FakeClock(), Check()
    checks = RecentChecks(5, clock)
    check.gate = asyncio.Event()
    first = asyncio.ensure_future(checks.run("a", check))
    second = asyncio.ensure_future(checks.run("a", check))
    await asyncio.sleep(0)
    first.cancel()
    check.gate.set()
    await second
    assert check.runs == 1
