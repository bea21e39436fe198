"""The run/stop handshake of a long-running adapter (the ``WorkConsumer`` port's): ``run()``
works until asked to stop; ``stop()`` asks, then returns once ``run()`` has ended, at once if
it never started."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class RunUntilStopped:
    def __init__(self) -> None:
        self.stopping = asyncio.Event()
        """Set once stopping is asked for (by ``stop()`` or by ``run()`` ending)."""
        self._finished = asyncio.Event()
        self._running = False

    @contextmanager
    def running(self) -> Iterator[None]:
        """Wraps ``run()``'s body: ``stop()`` waits for it to end."""
        self._running = True
        try:
            yield
        finally:
            self._finished.set()

    async def stop(self) -> bool:
        """Asks ``run()`` to stop and waits until it has ended; ``False`` when it never
        started (nothing was waited for)."""
        self.stopping.set()
        if not self._running:
            return False
        await self._finished.wait()
        return True
