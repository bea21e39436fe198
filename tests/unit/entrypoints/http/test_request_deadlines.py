"""The request deadlines of the HTTP protocol, where httptools parses differently from a
whole-buffer parser: a head or a body arriving in pieces, pipelined requests, bytes that begin
no request. A uvicorn server on loopback with a small ASGI app, on uvloop and on asyncio's own
loop (``FETCHER_EVENT_LOOP`` chooses either), spoken to over raw streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import pytest
import uvicorn
import uvloop

from entrypoints.http.request_deadlines import DeadlineHttpToolsProtocol
from entrypoints.runners import _Server
from tests.support.serving import stop_server

HEADER = 0.3
BODY = 0.6
KEEP_ALIVE = 1.2
SLOW = 0.6
"""How long ``/slow`` takes to answer."""
EARLY = 0.1
"""Tolerance before a deadline (timer granularity)."""
LATE = 1.5
"""Tolerance after a deadline (a loaded machine)."""

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Iterator[Callable[[Coroutine[Any, Any, None]], None]]:
    with asyncio.Runner(loop_factory=LOOPS[request.param]) as runner:
        yield runner.run


class App:
    """``/echo`` answers the body it read; ``/slow`` answers after ``SLOW`` seconds; any other
    path answers 404 without reading the body. Every message received is kept."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        if scope["path"] == "/echo":
            while True:
                message = await receive()
                self.received.append(message)
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            status = 200
        elif scope["path"] == "/slow":
            await asyncio.sleep(SLOW)
            status, body = 200, b"slow"
        else:
            status = 404
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serving(app: App, keep_alive: float = KEEP_ALIVE) -> AsyncIterator[int]:
    """The deadline protocol serving ``app`` on a free loopback port, as the roles serve."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        lifespan="off",
        http=DeadlineHttpToolsProtocol.with_timeouts(HEADER, BODY),
        timeout_keep_alive=keep_alive,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield sock.getsockname()[1]  # connections wait in the backlog until it serves
    finally:
        try:
            await stop_server(server, task)
        finally:
            sock.close()


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return reader, writer, time.monotonic()


async def response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status_line, *lines = head.decode().rstrip("\r\n").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, body


async def closed(reader: asyncio.StreamReader) -> tuple[bytes, float]:
    """What the server still sends before it closes, and when it closed."""
    rest = await asyncio.wait_for(reader.read(), 10)
    return rest, time.monotonic()


def post(path: str, body: bytes, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        path.encode(),
        size,
        body,
    )


def get(path: str) -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode()


def assert_408(answer: bytes, part: str, seconds: float) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert b"\r\nconnection: close" in head
    assert json.loads(body) == {
        "code": "FET-0001",
        "title": "Request Timeout",
        "message": f"The request {part} did not arrive within {seconds:g} seconds.",
    }


def test_a_head_and_body_split_anywhere_within_the_deadlines_are_served(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            request = post("/echo", b"hello")
            # inside the request line, between CR and LF, inside a header, then the body
            for piece in (request[:9], request[9:19], request[19:33], request[33:-3]):
                writer.write(piece)
                await asyncio.sleep(HEADER / 8)
            writer.write(request[-3:])
            status, _, body = await response(reader)
            assert (status, body) == (200, b"hello")
            writer.write(get("/echo"))  # the connection was kept
            assert (await response(reader))[0] == 200
            writer.close()

    run(scenario())


def test_pipelined_requests_are_answered_in_order_on_a_kept_connection(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            writer.write(post("/echo", b"one") + post("/echo", b"two") + get("/nowhere"))
            answers = [await response(reader) for _ in range(3)]
            assert [(status, body) for status, _, body in answers] == [
                (200, b"one"),
                (200, b"two"),
                (404, b""),
            ]
            await asyncio.sleep(HEADER + 0.2)  # idle between requests: no header deadline
            writer.write(post("/echo", b"three"))
            assert (await response(reader))[2] == b"three"
            writer.close()

    run(scenario())


def test_a_pipelined_head_gets_its_deadline_once_the_earlier_request_is_answered(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            writer.write(get("/slow") + b"GET /echo HTTP/1.1\r\nHo")
            status, _, body = await response(reader)
            answered = time.monotonic()
            assert (status, body) == (200, b"slow")  # not cut by the next head's deadline
            rest, at = await closed(reader)
            assert_408(rest, "headers", HEADER)
            assert HEADER - EARLY <= at - answered <= HEADER + LATE

    run(scenario())


def test_a_pipelined_head_is_answered_408_even_past_a_shorter_keep_alive(run):
    async def scenario() -> None:
        async with serving(App(), keep_alive=HEADER / 3) as port:
            reader, writer, _ = await connect(port)
            writer.write(get("/echo") + b"GET /echo HTTP/1.1\r\nHo")
            assert (await response(reader))[0] == 200
            answered = time.monotonic()
            rest, at = await closed(reader)
            assert_408(rest, "headers", HEADER)  # a request begun is not idle
            assert HEADER - EARLY <= at - answered <= HEADER + LATE

    run(scenario())


def test_a_pipelined_body_gets_its_deadline_once_the_earlier_request_is_answered(run):
    async def scenario() -> None:
        app = App()
        async with serving(app) as port:
            reader, writer, _ = await connect(port)
            writer.write(get("/slow") + post("/echo", b"ab", length=10))
            status, _, _ = await response(reader)
            answered = time.monotonic()
            assert status == 200
            rest, at = await closed(reader)
            assert_408(rest, "body", BODY)
            assert BODY - EARLY <= at - answered <= BODY + LATE
            assert app.received[-1] == {"type": "http.disconnect"}

    run(scenario())


def test_a_body_trickled_past_its_deadline_is_answered_408_and_the_app_reads_a_disconnect(
    run, caplog
):
    caplog.set_level(logging.INFO, logger="fetcher")

    async def scenario() -> None:
        app = App()
        async with serving(app) as port:
            reader, writer, _ = await connect(port)
            writer.write(post("/echo", b"", length=100))
            headers_sent = time.monotonic()
            answer = b""
            for _ in range(int((BODY + LATE) / 0.1)):
                writer.write(b"x")  # each byte is on time; the body as a whole is not
                with contextlib.suppress(TimeoutError):
                    answer = await asyncio.wait_for(reader.read(65536), 0.1)
                if answer:
                    break
            rest, at = await closed(reader)
            assert_408(answer + rest, "body", BODY)
            assert BODY - EARLY <= at - headers_sent <= BODY + LATE
            assert app.received[0]["type"] == "http.request"
            assert app.received[-1] == {"type": "http.disconnect"}

    run(scenario())
    lines = [r.getMessage() for r in caplog.records if "closed the connection" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith(f": request body late ({BODY:g}s)"), lines
    assert lines[0].startswith("closed the connection of 127.0.0.1:")


def test_a_new_connection_that_sends_nothing_is_closed_silently(run, caplog):
    caplog.set_level(logging.INFO, logger="fetcher")

    async def scenario() -> None:
        async with serving(App()) as port:
            reader, _, opened = await connect(port)
            rest, at = await closed(reader)
            assert rest == b""
            assert HEADER - EARLY <= at - opened <= HEADER + LATE

    run(scenario())
    assert not [r for r in caplog.records if "closed the connection" in r.getMessage()]


def test_a_following_head_has_its_deadline_from_its_first_byte(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            writer.write(get("/echo"))
            assert (await response(reader))[0] == 200
            await asyncio.sleep(HEADER + 0.2)  # idle, within the keep-alive
            writer.write(b"GET /echo HTTP/1.1\r\n")
            started = time.monotonic()
            rest, at = await closed(reader)
            assert_408(rest, "headers", HEADER)
            assert HEADER - EARLY <= at - started <= HEADER + LATE

    run(scenario())


def test_an_idle_kept_connection_is_closed_by_the_keep_alive_alone(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            writer.write(get("/echo"))
            assert (await response(reader))[0] == 200
            answered = time.monotonic()
            rest, at = await closed(reader)
            assert rest == b""
            assert KEEP_ALIVE - EARLY <= at - answered <= KEEP_ALIVE + LATE

    run(scenario())


def test_blank_lines_between_requests_do_not_hold_the_connection(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            writer.write(get("/echo"))
            assert (await response(reader))[0] == 200
            writer.write(b"\r\n")  # begins no request, yet cancels uvicorn's keep-alive
            sent = time.monotonic()
            rest, at = await closed(reader)
            assert rest == b""
            assert at - sent <= HEADER + LATE

    run(scenario())


def test_an_unfinished_body_after_an_early_answer_is_closed_at_the_body_deadline(run):
    async def scenario() -> None:
        async with serving(App()) as port:
            reader, writer, _ = await connect(port)
            writer.write(post("/nowhere", b"{", length=10))
            sent = time.monotonic()
            status, _, _ = await response(reader)
            assert status == 404
            rest, at = await closed(reader)
            assert rest == b""  # answered already: no 408 after the answer
            assert BODY - EARLY <= at - sent <= BODY + LATE  # before the keep-alive

    run(scenario())
