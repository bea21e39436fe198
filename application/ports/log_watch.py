from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol


class LogWatch(Protocol):
    """Tells the log's followers that the event log may have grown, so they read it now
    instead of at their next poll.

    Contract:
    - ``run`` calls ``on_growth`` soon after events are appended to the log (by any process),
      until ``stop`` is set, then returns. ``on_growth`` is cheap and never raises.
    - It is a hint, never the only way followers learn of new events: a growth may be told
      late, more than once, or (while the watch is reconnecting) not at all, so followers keep
      polling at a slower pace. After each (re)connection it calls ``on_growth`` once, since
      events appended meanwhile were not told.
    - Failures to connect are retried with bounded backoff; they never end ``run``.
    """

    async def run(self, stop: asyncio.Event, on_growth: Callable[[], None]) -> None: ...


log = logging.getLogger(__name__)


class AppendSignal(LogWatch):
    """Told by the store after each transaction that committed records (``notify``); heard
    through a callback (``subscribed``, or ``run`` as a ``LogWatch``) or awaited (``wait``).

    Not bound to an event loop: callbacks run in the task that committed, on its loop."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] = []

    def notify(self) -> None:
        for listener in tuple(self._listeners):
            try:
                listener()
            except Exception:  # one broken listener does not keep the others from hearing
                log.exception("an event store growth listener failed")

    @contextlib.contextmanager
    def subscribed(self, listener: Callable[[], None]) -> Iterator[None]:
        """``listener`` is called after every commit, until the block ends."""
        self._listeners.append(listener)
        try:
            yield
        finally:
            self._listeners.remove(listener)

    async def wait(self) -> None:
        """Returns after the next commit of records."""
        heard: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def tell() -> None:
            if not heard.done():
                heard.set_result(None)

        with self.subscribed(tell):
            await heard

    async def run(self, stop: asyncio.Event, on_growth: Callable[[], None]) -> None:
        with self.subscribed(on_growth):
            # What was appended before subscribing was not told.
            on_growth()
            await stop.wait()


class AnyLogWatch(LogWatch):
    """Tells a growth whenever any of ``watches`` does (e.g. this process's appends, at once,
    and the other processes' through the database)."""

    def __init__(self, watches: Sequence[LogWatch]) -> None:
        self._watches = tuple(watches)

    async def run(self, stop: asyncio.Event, on_growth: Callable[[], None]) -> None:
        await asyncio.gather(*(watch.run(stop, on_growth) for watch in self._watches))
