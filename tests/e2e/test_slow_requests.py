"""A client too slow to send its request cannot hold a connection: against a real
`fetcher serve`, over raw sockets, unfinished headers and unfinished bodies are answered 408
in the one error shape and the connection is closed; a connection that sends nothing is
closed; a request sent in pieces within the deadlines is served, and so are pipelined
requests. On uvloop, the default, and on asyncio's own loop (``FETCHER_EVENT_LOOP``)."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Processes, serving

HEADER_TIMEOUT = 1
BODY_TIMEOUT = 2
SLACK = 1.5


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Processes]:
    with serving(
        tmp_path_factory,
        "slow",
        FETCHER_HTTP_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT),
        FETCHER_HTTP_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT),
        FETCHER_EVENT_LOOP=request.param,
    ) as processes:
        yield processes


def _connect(server: Processes) -> socket.socket:
    host, port = server.api_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.settimeout(HEADER_TIMEOUT + BODY_TIMEOUT + 10)
    return sock


def _read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (monotonic)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received, time.monotonic()


def _assert_timed_out(answer: bytes, part: str, seconds: int) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 408 Request Timeout", answer
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    assert json.loads(body) == {
        "code": "FET-0001",
        "title": "Request Timeout",
        "message": f"The request {part} did not arrive within {seconds} seconds.",
    }


def test_a_connection_that_sends_nothing_is_closed(server: Processes) -> None:
    with _connect(server) as sock:
        opened = time.monotonic()
        answer, closed = _read_until_closed(sock)
    assert answer == b""
    assert HEADER_TIMEOUT - 0.2 <= closed - opened <= HEADER_TIMEOUT + SLACK


def test_unfinished_headers_are_answered_408_and_closed(server: Processes) -> None:
    with _connect(server) as sock:
        opened = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: fetcher\r\n")
        answer, closed = _read_until_closed(sock)
    _assert_timed_out(answer, "headers", HEADER_TIMEOUT)
    assert HEADER_TIMEOUT - 0.2 <= closed - opened <= HEADER_TIMEOUT + SLACK


def test_headers_trickled_byte_by_byte_still_meet_the_deadline(server: Processes) -> None:
    request = b"GET /health HTTP/1.1\r\nHost: fetcher\r\nX-Slow: " + b"a" * 100
    with _connect(server) as sock:
        opened = time.monotonic()
        try:
            for byte in request:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
        except OSError:  # the server closed the connection under us
            pass
        answer, closed = _read_until_closed(sock)
    _assert_timed_out(answer, "headers", HEADER_TIMEOUT)
    assert closed - opened <= HEADER_TIMEOUT + SLACK


def test_an_unfinished_body_is_answered_408_and_closed(server: Processes) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/management/connections HTTP/1.1\r\nHost: fetcher\r\n"
            b"Content-Type: application/json\r\nX-Product-Name: payments\r\n"
            b"Content-Length: 100\r\n\r\n"
        )
        headers_sent = time.monotonic()
        sock.sendall(b'{"configName": ')
        answer, closed = _read_until_closed(sock)
    _assert_timed_out(answer, "body", BODY_TIMEOUT)
    assert BODY_TIMEOUT - 0.2 <= closed - headers_sent <= BODY_TIMEOUT + SLACK
    assert "Exception in ASGI application" not in server.tail()


def test_an_unfinished_body_after_an_early_answer_still_closes_the_connection(
    server: Processes,
) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /nowhere HTTP/1.1\r\nHost: fetcher\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        headers_sent = time.monotonic()
        answer, closed = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 404 "), answer
    assert b"408" not in answer
    assert BODY_TIMEOUT - 0.2 <= closed - headers_sent <= BODY_TIMEOUT + SLACK


def test_a_request_sent_in_pieces_in_time_is_served_and_the_connection_kept(
    server: Processes,
) -> None:
    body = b'{"configName": "x"}'
    with _connect(server) as sock:
        for _ in range(2):
            for piece in (
                b"POST /v1/management/connections HTTP/1.1\r\nHost: fetcher\r\n",
                b"Content-Type: application/json\r\nX-Product-Name: payments\r\n",
                b"Content-Length: %d\r\n\r\n" % len(body),
                body[:5],
                body[5:],
            ):
                sock.sendall(piece)
                time.sleep(HEADER_TIMEOUT / 4)
            head = sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 400 "), head
            assert b"connection: close" not in head.lower()
            # after a response, the connection idles without a header deadline of its own
            time.sleep(HEADER_TIMEOUT + 0.5)


def test_pipelined_requests_are_answered_in_order(server: Processes) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"GET /health HTTP/1.1\r\nHost: fetcher\r\n\r\n"
            b"GET /nowhere HTTP/1.1\r\nHost: fetcher\r\n\r\n"
            b"GET /health HTTP/1.1\r\nHost: fetcher\r\nConnection: close\r\n\r\n"
        )
        answer, _ = _read_until_closed(sock)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer) == [b"200", b"404", b"200"], answer
