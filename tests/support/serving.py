"""Stopping a uvicorn server a test started, within a bound: a server that does not shut down
(a request that never ends) fails the test instead of hanging it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

SHUTDOWN_SECONDS = 10.0


async def stop_server(
    server: Any, task: asyncio.Task[Any], within: float = SHUTDOWN_SECONDS
) -> None:
    """Asks ``server`` (a ``uvicorn.Server`` serving in ``task``) to exit and waits up to
    ``within`` seconds; past that it forces the exit, cancels the task and fails."""
    server.should_exit = True
    try:
        await asyncio.wait_for(asyncio.shield(task), within)
    except TimeoutError:
        server.force_exit = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, 2)
        raise AssertionError(
            f"the server did not shut down within {within:.0f} s: a connection or request "
            "never ended"
        ) from None
