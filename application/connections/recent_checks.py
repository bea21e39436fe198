"""Remembering that a check passed, for a short window, and sharing a check already running."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from datetime import datetime, timedelta

from application.ports.clock import Clock

_PRUNE_AT = 4096


class RecentChecks:
    """Runs a check unless the same check (same ``key``) passed within the last
    ``window_seconds``; callers that ask while it runs wait for that run and share its outcome.

    Only successes are remembered: a failing check fails every caller that waited for it, and
    the next caller runs it again. A window of 0 remembers nothing (concurrent callers still
    share one run). The key must name everything the outcome depends on; callers put the
    tenant in it, so one tenant's success never answers for another.
    """

    def __init__(self, window_seconds: float, clock: Clock) -> None:
        if window_seconds < 0:
            raise ValueError("window_seconds must not be negative")
        self._window = timedelta(seconds=window_seconds)
        self._clock = clock
        self._passed: dict[Hashable, datetime] = {}
        self._running: dict[Hashable, asyncio.Future[None]] = {}

    async def run(self, key: Hashable, check: Callable[[], Awaitable[None]]) -> None:
        now = self._clock.now()
        passed = self._passed.get(key)
        if passed is not None and now - passed < self._window:
            return
        running = self._running.get(key)
        if running is None:
            running = asyncio.ensure_future(self._check(key, check))
            # Its outcome counts as seen even when every caller stopped waiting for it.
            running.add_done_callback(_retrieve)
            self._running[key] = running
        await asyncio.shield(running)

    async def _check(self, key: Hashable, check: Callable[[], Awaitable[None]]) -> None:
        try:
            await check()
        except BaseException:
            self._passed.pop(key, None)
            raise
        else:
            if self._window:
                self._remember(key, self._clock.now())
        finally:
            self._running.pop(key, None)

    def _remember(self, key: Hashable, when: datetime) -> None:
        if len(self._passed) >= _PRUNE_AT:
            oldest = when - self._window
            self._passed = {k: t for k, t in self._passed.items() if t > oldest}
        self._passed[key] = when


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
