"""What the retries with ``tenacity`` share: a wait between tries that a stop cuts short."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


def sleep_unless(stop: asyncio.Event) -> Callable[[float], Awaitable[None]]:
    """A ``tenacity`` sleep that returns as soon as ``stop`` is set."""

    async def sleep(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    return sleep
