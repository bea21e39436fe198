"""A TCP proxy on loopback that a test cuts and restores, to take a dependency away from the
processes under test (and give it back) without touching the shared server behind it.

It runs its own event loop in a thread, so synchronous and asynchronous tests use it alike:

    with ThreadedTcpProxy("127.0.0.1", 5672) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
        ...
        proxy.cut()       # the listener closes and every open connection is reset:
                          # clients see "connection refused", as for a stopped server
        proxy.restore()   # listening again on the same port
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from types import TracebackType

CHUNK = 64 * 1024


class ThreadedTcpProxy:
    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._requested_port = port
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self.accepted = 0
        """Connections taken since the start (a test sees that a process dialled)."""

    def __enter__(self) -> ThreadedTcpProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def listening(self) -> bool:
        return self._server is not None

    def start(self) -> ThreadedTcpProxy:
        self._thread.start()
        self.restore()
        return self

    def cut(self) -> None:
        """Stops listening and resets every open connection."""
        self._call(self._cut())

    def restore(self) -> None:
        """Listens again (on the port it had, once it has one)."""
        self._call(self._listen())

    def close(self) -> None:
        if self._thread.is_alive():
            self._call(self._cut())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, coroutine: object) -> None:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)  # type: ignore[arg-type]
        future.result(timeout=10)

    async def _listen(self) -> None:
        if self._server is not None:
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port or self._requested_port))
        self.port = int(sock.getsockname()[1])
        self._server = await asyncio.start_server(self._serve, sock=sock)

    async def _cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._connections):
            _reset(writer)
        self._connections.clear()
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)
            return
        pair = {writer, upstream_writer}
        self._connections |= pair
        try:
            await asyncio.gather(_pump(reader, upstream_writer), _pump(upstream_reader, writer))
        finally:
            self._connections -= pair
            for each in pair:
                with contextlib.suppress(Exception):
                    each.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Closes with a reset (no orderly shutdown), as when the peer goes away."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
    with contextlib.suppress(Exception):
        writer.transport.abort()
