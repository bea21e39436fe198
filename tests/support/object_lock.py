"""An S3 bucket with Object Lock, as its uploads see it: an HTTP front to the S3 test server
that refuses a PutObject or UploadPart carrying neither ``Content-MD5`` nor an
``x-amz-checksum-*`` header, with the answer AWS S3 gives for a bucket with a default retention
(400 ``InvalidRequest``), and passes every other request through unchanged (the server checks
their signatures, and a ``Content-MD5`` against the body: 400 ``BadDigest`` when it differs).

nanio has no Object Lock; this puts its one upload rule in front of it. HTTP/1.1 with
``Content-Length`` bodies (what botocore sends with payload signing off), answers with a
``Content-Length`` or chunked::

    async with ObjectLockFront("127.0.0.1", 9100) as front:
        endpoint = front.endpoint      # http://127.0.0.1:<port>
        ...
        front.refused                  # the uploads turned away, e.g. ["PUT /bucket/key"]
        front.uploads                  # every PutObject/UploadPart: (request line, had MD5)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from types import TracebackType

_REFUSALS = {
    False: "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests "
    "with Object Lock parameters",
    True: "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Part requests "
    "with Object Lock parameters",
}


class ObjectLockFront:
    def __init__(self, target_host: str, target_port: int, *, locked: bool = True) -> None:
        """``locked=False``: a bucket without Object Lock (uploads are only recorded)."""
        self._target = (target_host, target_port)
        self._locked = locked
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.refused: list[str] = []
        self.uploads: list[tuple[str, bool]] = []

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> ObjectLockFront:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                line, headers = _parse_head(head)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                method, target = line.split(" ")[:2]
                path, _, query = target.partition("?")
                if method == "PUT" and path.count("/") >= 2 and "x-amz-copy-source" not in headers:
                    digested = "content-md5" in headers or any(
                        name.startswith("x-amz-checksum-") for name in headers
                    )
                    self.uploads.append((f"{method} {path}", digested))
                    if self._locked and not digested:
                        self.refused.append(f"{method} {path}")
                        writer.write(_refusal(part="uploadId=" in query))
                        await writer.drain()
                        continue
                if upstream is None:
                    upstream = await asyncio.open_connection(*self._target)
                upstream[1].write(head + body)
                await upstream[1].drain()
                await _relay_answer(upstream[0], writer, head_only=method == "HEAD")
        finally:
            self._tasks.discard(task)
            if upstream is not None:
                upstream[1].close()
            writer.close()


@contextlib.contextmanager
def front_thread(target_host: str, target_port: int) -> Iterator[ObjectLockFront]:
    """A front on its own event loop in a thread, for tests that block (processes)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    front = ObjectLockFront(target_host, target_port)
    asyncio.run_coroutine_threadsafe(front.__aenter__(), loop).result(10)
    try:
        yield front
    finally:
        asyncio.run_coroutine_threadsafe(front.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for raw in lines[1:]:
        if raw:
            name, _, value = raw.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _refusal(*, part: bool) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidRequest</Code>'
        f"<Message>{_REFUSALS[part]}</Message><RequestId>0</RequestId></Error>"
    ).encode()
    head = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


async def _relay_answer(
    upstream: asyncio.StreamReader, client: asyncio.StreamWriter, *, head_only: bool
) -> None:
    head = await upstream.readuntil(b"\r\n\r\n")
    client.write(head)
    status, headers = _parse_head(head)
    code = int(status.split(" ")[1])
    if head_only or code in (204, 304) or 100 <= code < 200:
        pass
    elif "content-length" in headers:
        client.write(await upstream.readexactly(int(headers["content-length"])))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await upstream.readuntil(b"\r\n")
            client.write(size_line)
            size = int(size_line.split(b";")[0], 16)
            client.write(await upstream.readexactly(size + 2))
            if size == 0:
                break
    await client.drain()
