"""Every test of the suite: a test that hangs inside the event loop fails, with a traceback,
instead of holding CI until its time limit.

pytest-timeout's signal fires in the main thread; when the event loop is running a callback
then, the failure can be swallowed by a task whose teardown then waits forever (a server that
never shuts down). So each coroutine test also runs under ``asyncio.timeout`` of a little less
than its pytest-timeout limit: the test's task is cancelled, what it awaits is cancelled with
it, and the test fails saying so. The signal stays the backstop for a loop that is blocked.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

IN_LOOP_SHARE = 0.85
"""The share of a test's pytest-timeout limit after which its coroutine is cancelled."""


def _limit(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    configured = item.config.getini("timeout")
    return float(configured) if configured else None


def _bounded(
    test: Callable[..., Coroutine[Any, Any, Any]], seconds: float
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> Any:
        deadline = asyncio.timeout(seconds)
        try:
            async with deadline:
                return await test(*args, **kwargs)
        except TimeoutError:
            if deadline.expired():
                pytest.fail(
                    f"the test did not finish within {seconds:.0f} s inside the event loop "
                    "(it hung: see the traceback for what it was awaiting)",
                    pytrace=True,
                )
            raise

    return bounded


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        test = getattr(item, "obj", None)
        seconds = _limit(item)
        if seconds and inspect.iscoroutinefunction(test):
            item.obj = _bounded(test, seconds * IN_LOOP_SHARE)  # type: ignore[attr-defined]
