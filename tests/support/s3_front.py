"""An HTTP front to the S3 test server that answers as AWS S3 does where nanio does not, and
passes every other request through unchanged (the server checks their signatures, and a
``Content-MD5`` against the body: 400 ``BadDigest`` when it differs):

- a conditional create (``If-None-Match: *``) of a key already written through the front is
  refused with 412 ``PreconditionFailed`` (nanio ignores the condition);
- ``object_lock=True``, a bucket with S3 Object Lock: a PutObject or UploadPart carrying neither
  ``Content-MD5`` nor an ``x-amz-checksum-*`` header is refused with the answer AWS S3 gives for a
  bucket with a default retention (400 ``InvalidRequest``);
- ``readable=False``, credentials that may write objects but not read them (an IAM policy with
  ``s3:PutObject`` and no ``s3:GetObject``): reading an object is 403 ``AccessDenied``.

HTTP/1.1 with ``Content-Length`` bodies (what botocore sends with payload signing off), answers
with a ``Content-Length`` or chunked::

    async with S3Front("127.0.0.1", 9100, object_lock=True) as front:
        endpoint = front.endpoint      # http://127.0.0.1:<port>
        ...
        front.refused                  # the uploads turned away, e.g. ["PUT /bucket/key"]
        front.uploads                  # every PutObject/UploadPart: (request line, had MD5)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from types import TracebackType

from tests.support.tcp_proxy import in_own_loop

_REFUSALS = {
    False: "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests "
    "with Object Lock parameters",
    True: "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Part requests "
    "with Object Lock parameters",
}


class S3Front:
    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        object_lock: bool = False,
        readable: bool = True,
    ) -> None:
        self._target = (target_host, target_port)
        self._object_lock = object_lock
        self._readable = readable
        self._written: set[str] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.refused: list[str] = []
        self.uploads: list[tuple[str, bool]] = []

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> S3Front:
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
                answer = self._refusal(method, path, query, headers)
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
                    continue
                if upstream is None:
                    upstream = await asyncio.open_connection(*self._target)
                upstream[1].write(head + body)
                await upstream[1].drain()
                status = await _relay_answer(upstream[0], writer, head_only=method == "HEAD")
                if status == 200 and (method, "uploadId=" in query) in (
                    ("PUT", False),
                    ("POST", True),
                ):
                    self._written.add(path)  # put, or a multipart upload completed
        finally:
            self._tasks.discard(task)
            if upstream is not None:
                upstream[1].close()
            writer.close()

    def _refusal(self, method: str, path: str, query: str, headers: dict[str, str]) -> bytes | None:
        """The answer AWS S3 would give instead of the server's, if any."""
        on_object = path.count("/") >= 2
        if not on_object:
            return None
        if method in ("GET", "HEAD") and not self._readable:
            return _error(403, "AccessDenied", "Access Denied", head_only=method == "HEAD")
        if method != "PUT" or "x-amz-copy-source" in headers:
            return None
        digested = "content-md5" in headers or any(
            name.startswith("x-amz-checksum-") for name in headers
        )
        self.uploads.append((f"{method} {path}", digested))
        if self._object_lock and not digested:
            self.refused.append(f"{method} {path}")
            return _error(400, "InvalidRequest", _REFUSALS["uploadId=" in query])
        if headers.get("if-none-match") == "*" and path in self._written:
            return _error(
                412,
                "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold",
            )
        return None


@contextlib.contextmanager
def front_thread(target_host: str, target_port: int, **rules: bool) -> Iterator[S3Front]:
    """A front on its own event loop in a thread, for tests that block (processes)."""
    with in_own_loop(S3Front(target_host, target_port, **rules)) as front:
        yield front


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for raw in lines[1:]:
        if raw:
            name, _, value = raw.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _error(status: int, code: str, message: str, *, head_only: bool = False) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>0</RequestId></Error>"
    ).encode()
    reason = {400: "Bad Request", 403: "Forbidden", 412: "Precondition Failed"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head if head_only else head + body


async def _relay_answer(
    upstream: asyncio.StreamReader, client: asyncio.StreamWriter, *, head_only: bool
) -> int:
    """Relays one answer; its status."""
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
    return code
