"""Hearing the event store grow: PostgreSQL ``LISTEN`` on the channel the recorder notifies,
on asyncpg like the event store's own statements (one driver on the event loop).

The library's PostgreSQL recorder runs ``NOTIFY <channel>`` in the transaction that inserts
events, so a notification is delivered when (and only if) the events are committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg

from adapters.common.postgres import PostgresAddress, connect
from application.ports.log_watch import LogWatch

log = logging.getLogger(__name__)


class PostgresLogWatch(LogWatch):
    """``LogWatch`` on one PostgreSQL connection of its own that listens on ``channel``."""

    def __init__(
        self,
        database: PostgresAddress,
        channel: str,
        *,
        connect_timeout: int = 5,
        max_backoff: float = 30.0,
    ) -> None:
        self._database = database
        self._channel = channel
        self._connect_timeout = connect_timeout
        self._max_backoff = max_backoff
        self.listening = asyncio.Event()
        """Set while the connection listens (for tests and logs)."""

    async def run(self, stop: asyncio.Event, on_growth: Callable[[], None]) -> None:
        listening = asyncio.ensure_future(self._listen_until_stopped(on_growth))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({listening, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (listening, stopped):
                task.cancel()
            await asyncio.gather(listening, stopped, return_exceptions=True)

    async def _listen_until_stopped(self, on_growth: Callable[[], None]) -> None:
        backoff = 0.5
        while True:
            try:
                await self._listen(on_growth)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
                if self.listening.is_set():
                    backoff = 0.5
                log.warning(
                    "event log listener: will reconnect in %.1fs after: %s",
                    backoff,
                    type(error).__name__,
                )
            self.listening.clear()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    async def _listen(self, on_growth: Callable[[], None]) -> None:
        connection = await connect(self._database, timeout=self._connect_timeout)
        lost = asyncio.Event()
        try:
            connection.add_termination_listener(lambda _connection: lost.set())
            await connection.add_listener(self._channel, lambda *_notification: on_growth())
            self.listening.set()
            # Whatever was appended before LISTEN took effect was not told.
            on_growth()
            await lost.wait()
            raise ConnectionError("the listening connection was closed")
        finally:
            if not connection.is_closed():
                try:
                    await asyncio.wait_for(connection.close(), timeout=self._connect_timeout)
                except Exception:  # TimeoutError included; the connection is dropped anyway
                    connection.terminate()
