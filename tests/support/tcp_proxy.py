"""A TCP proxy a test can cut and restore, to take a service away from a process under test
(its connections drop and new ones are refused) and give it back on the same port, without
touching the shared server behind it.

``TcpProxy`` runs on the test's event loop (``async with proxied(host, port) as proxy``, or
``proxy_thread`` for a loop of its own); ``ThreadedTcpProxy`` runs one on a loop of its own in
a thread with a blocking API, for tests that block (processes, ``time.sleep``)::

    with ThreadedTcpProxy("127.0.0.1", 5672) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
        ...
        proxy.cut()       # "connection refused" for new connections, open ones reset
        proxy.restore()   # listening again on the same port
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


class TcpProxy:
    def __init__(
        self,
        target_host: str,
        target_port: int,
        host: str = "127.0.0.1",
        *,
        rate: float | None = None,
    ) -> None:
        """``rate``: bytes per second the target's answers are slowed to (None: as fast as
        they come)."""
        self._target = (target_host, target_port)
        self._rate = rate
        self._host = host
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.accepted = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._accept, self._host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def cut(self) -> None:
        """Refuses new connections and resets the open ones."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        self._writers.clear()
        if server is not None:
            await asyncio.wait_for(server.wait_closed(), 5)

    async def restore(self) -> None:
        await self.start()

    async def close(self) -> None:
        await self.cut()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        pipes = {
            asyncio.create_task(_pipe(reader, up_writer)),
            asyncio.create_task(_pipe(up_reader, writer, self._rate)),
        }
        self._pipes |= pipes
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            for end in (writer, up_writer):
                end.transport.abort()
                self._writers.discard(end)
            self._pipes -= pipes


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, rate: float | None = None
) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while data := await source.read(4096 if rate else 65536):
            sink.write(data)
            await sink.drain()
            if rate:
                await asyncio.sleep(len(data) / rate)


@contextlib.asynccontextmanager
async def proxied(
    target_host: str, target_port: int, *, rate: float | None = None
) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(target_host, target_port, rate=rate)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


@contextlib.contextmanager
def in_own_loop(manager: contextlib.AbstractAsyncContextManager[T]) -> Iterator[T]:
    """``manager`` entered and left on an event loop of its own in a thread, for tests that
    block (processes, ``time.sleep``) while it serves."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    entered = asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(10)
    try:
        yield entered
    finally:
        asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@contextlib.contextmanager
def proxy_thread(
    target_host: str, target_port: int, *, rate: float | None = None
) -> Iterator[TcpProxy]:
    """A proxy on its own event loop in a thread, for tests that are not async."""
    with in_own_loop(proxied(target_host, target_port, rate=rate)) as proxy:
        yield proxy


class ThreadedTcpProxy:
    """A ``TcpProxy`` on an event loop of its own, in a daemon thread, with a blocking API."""

    def __init__(self, target_host: str, target_port: int, *, rate: float | None = None) -> None:
        self._proxy = TcpProxy(target_host, target_port, rate=rate)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._proxy.port

    @property
    def accepted(self) -> int:
        """Connections taken since the start (a test sees that a process dialled)."""
        return self._proxy.accepted

    def __enter__(self) -> ThreadedTcpProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> ThreadedTcpProxy:
        self._thread.start()
        self._call(self._proxy.start())
        return self

    def cut(self) -> None:
        """Stops listening and resets every open connection."""
        self._call(self._proxy.cut())

    def restore(self) -> None:
        """Listens again on the same port."""
        self._call(self._proxy.restore())

    def close(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(self._proxy.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)
