"""Deadlines for receiving a request, on uvicorn's h11 protocol.

uvicorn waits for a request's headers and body as long as the client keeps the connection
open, so a client that sends a few bytes (or none) and stalls holds a connection and a task
for ever. This protocol gives the headers ``header_timeout`` seconds, counted from the
connection's opening or from the first byte of a following request, and then the body
``body_timeout`` seconds. A late request is answered 408 in the one error shape, and the
connection is closed; a new connection that sends nothing is closed without an answer. Between
requests, uvicorn's keep-alive timeout applies as before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar, Literal

import h11
import msgspec
from uvicorn.protocols.http.h11_impl import H11Protocol

from domain import error_catalogue as catalogue
from entrypoints.http.schemas import ErrorBody

log = logging.getLogger("fetcher")

Phase = Literal["headers", "body"]


def timeout_response(
    part: Phase, seconds: float, extra_headers: list[tuple[bytes, bytes]]
) -> bytes:
    """A complete ``408 Request Timeout`` response that closes the connection."""
    entry = catalogue.REQUEST_TIMEOUT
    message = entry.render(part=part, seconds=f"{seconds:g}")
    body = msgspec.json.encode(ErrorBody(code=entry.code, title=entry.title, message=message))
    headers = [
        *extra_headers,
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    return b"HTTP/1.1 408 Request Timeout\r\n" + head + b"\r\n" + body


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the headers and one for the body."""

    header_timeout: ClassVar[float] = 10.0
    body_timeout: ClassVar[float] = 30.0

    @classmethod
    def with_timeouts(cls, header_timeout: float, body_timeout: float) -> type[H11Protocol]:
        """This protocol with other deadlines (uvicorn builds a protocol from a class)."""
        attributes = {"header_timeout": header_timeout, "body_timeout": body_timeout}
        return type(cls.__name__, (cls,), attributes)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: Phase | None = None
        self._deadline: asyncio.TimerHandle | None = None

    # uvicorn narrows asyncio's BaseTransport to Transport in the method it overrides.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start("headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _follow(self) -> None:
        """Starts, keeps or stops the deadline for what the connection is waiting for."""
        state = self.conn.their_state
        if self.transport.is_closing():
            self._stop()
        elif state is h11.SEND_BODY:
            self._start("body")
        elif state is h11.IDLE and self.timeout_keep_alive_task is None:
            self._start("headers")  # bytes of a request's head arrived (or none yet)
        else:
            self._stop()  # a whole request is in, or the connection idles between requests

    def _start(self, phase: Phase) -> None:
        if self._phase == phase:
            return  # the deadline runs from the phase's start, not from the latest bytes
        self._stop()
        seconds = self.header_timeout if phase == "headers" else self.body_timeout
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expire, phase, seconds)

    def _stop(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._phase = None, None

    def _expire(self, phase: Phase, seconds: float) -> None:
        self._deadline, self._phase = None, None
        if self.transport.is_closing():
            return
        cycle = self.cycle if phase == "body" else None
        received_nothing = phase == "headers" and not self.conn.trailing_data[0]
        if not received_nothing and (cycle is None or not cycle.response_started):
            headers = list(self.server_state.default_headers)
            self.transport.write(timeout_response(phase, seconds, headers))
        if cycle is not None:
            # The application, still waiting for the body, now reads a disconnect, and
            # anything it sends is dropped.
            cycle.disconnected = True
            cycle.message_event.set()
        if not received_nothing:
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            log.info("closed the connection of %s: request %s late (%gs)", client, phase, seconds)
        self.transport.close()
