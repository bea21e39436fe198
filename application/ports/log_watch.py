from __future__ import annotations

import asyncio
from collections.abc import Callable
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
