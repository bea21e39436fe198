"""The outermost layer of the API: each request's id, its log fields and the access log.

The id is the caller's ``X-Request-Id`` when it is a plausible id (at most 128 characters
from a safe set, so it cannot forge log lines), else a new UUID; it is returned in the
response's ``X-Request-Id``, carried by every log line of the request and recorded with a
job it creates. The access log (``fetcher.access``, event ``http.request``) has the method,
the path (never the query string), the status and the duration; never a header value or a
body. Probes and metrics scrapes are logged at DEBUG, everything else at INFO.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any
from uuid import uuid4

from litestar import Request
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from application.log_context import log_fields

REQUEST_ID_HEADER = b"x-request-id"
STATE_KEY = "request_id"
QUIET_PATHS = re.compile(r"^/(health|readyz|metrics)(/|$)")
_PLAUSIBLE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+=@/-]{0,127}$")
_UUID_SEGMENT = re.compile(
    r"/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

access_log = logging.getLogger("fetcher.access")


def incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == REQUEST_ID_HEADER:
            text = value.decode("latin-1").strip()
            return text if _PLAUSIBLE_ID.match(text) else None
    return None


def request_id_of(request: Request[Any, Any, Any]) -> str:
    """The id ``RequestContext`` gave the request (empty outside it)."""
    state = request.scope.get("state") or {}
    return str(state.get(STATE_KEY, ""))


def route_name(scope: Scope) -> str:
    """``<METHOD> <path>`` with ids replaced by ``{id}``: a span name of bounded variety."""
    path = _UUID_SEGMENT.sub("/{id}", str(scope.get("path", "")))
    return f"{scope.get('method', '')} {path}".strip()


class RequestContext:
    """ASGI middleware around the whole application (404s and refused tokens included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        request_id = incoming_request_id(scope) or str(uuid4())
        scope.setdefault("state", {})[STATE_KEY] = request_id
        header = (REQUEST_ID_HEADER, request_id.encode("ascii"))
        status = 500
        started = time.monotonic()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != REQUEST_ID_HEADER
                ]
                message = {**message, "headers": [*headers, header]}
            await send(message)

        with log_fields(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                path = str(scope.get("path", ""))
                access_log.log(
                    logging.DEBUG if QUIET_PATHS.match(path) else logging.INFO,
                    "http.request",
                    extra={
                        "method": scope.get("method", ""),
                        "path": path,
                        "status": status,
                        "duration_ms": int((time.monotonic() - started) * 1000),
                    },
                )
