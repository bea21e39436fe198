"""Deadlines for receiving a request, on uvicorn's httptools protocol.

uvicorn waits for a request's headers and body as long as the client keeps the connection
open, so a client that sends a few bytes (or none) and stalls holds a connection and a task
for ever. This protocol gives the headers ``header_timeout`` seconds, counted from the
connection's opening or from the first byte of a following request, and then the body
``body_timeout`` seconds. A late request is answered 408 in the one error shape, and the
connection is closed; a new connection that sends nothing is closed without an answer. Between
requests, uvicorn's keep-alive timeout applies as before.

The deadlines run only while it is the client's turn: a pipelined request that arrives while
an earlier one is still being answered waits unread (uvicorn pauses reading), and its deadline
starts once the earlier response is complete.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar, Literal

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for the headers and one for the body."""

    header_timeout: ClassVar[float] = 10.0
    body_timeout: ClassVar[float] = 30.0

    @classmethod
    def with_timeouts(cls, header_timeout: float, body_timeout: float) -> type[HttpToolsProtocol]:
        """This protocol with other deadlines (uvicorn builds a protocol from a class)."""
        attributes = {"header_timeout": header_timeout, "body_timeout": body_timeout}
        return type(cls.__name__, (cls,), attributes)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._receiving: Phase | None = None
        """The part of a request the parser is in: from its first byte, ``headers``; from
        the end of its head, ``body``; ``None`` once it is whole (or before any byte)."""
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

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._receiving = "headers"

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._receiving = "body"

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._receiving = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _awaited(self) -> Phase | None:
        """What the connection waits for from the client, when it is the client's turn."""
        cycle = self.cycle
        answered = cycle is None or (cycle.response_complete and not self.pipeline)
        if self._receiving is None:
            # No byte of a request yet: on a new connection, or on one whose keep-alive
            # timer uvicorn cancelled for bytes that began no request (blank lines).
            idle = answered and self.timeout_keep_alive_task is None
            return "headers" if idle else None
        if self.pipeline or (self._receiving == "headers" and not answered):
            return None  # an earlier request is still being answered
        return self._receiving

    def _follow(self) -> None:
        """Starts, keeps or stops the deadline for what the connection is waiting for."""
        phase = None if self.transport.is_closing() else self._awaited()
        if phase is None:
            self._stop()
            return
        # A request has begun: its deadline, not the keep-alive between requests, applies.
        self._unset_keepalive_if_required()
        self._start(phase)

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
        received_nothing = phase == "headers" and self._receiving is None
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
