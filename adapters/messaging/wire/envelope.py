"""The signed envelope every message Fetcher publishes shares (reference §4.8, §5.2, §5.5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from uuid import uuid4

from application.ports.signer import MessageSigner
from application.ports.tracer import TraceCarrier, trace_headers
from domain.job import Job

TENANT_HEADER = "X-Tenant-ID"
REQUEST_ID_HEADER = "X-Request-Id"
RETRY_COUNT_HEADER = "x-retry-count"
CONTENT_TYPE = "application/json"
"""The AMQP ``content_type`` of every message, and the events' ``datacontenttype``."""


HeaderValue = str | bytes | int
"""A header value and the AMQP field type it goes out as (the reference's, §4.8 and §5.2):
``bytes`` a byte array (``x``), ``str`` a long string (``S``), ``int`` a long-int (``I``)."""


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message ready for the broker: where it goes, its headers, the exact signed body."""

    exchange: str
    routing_key: str
    headers: dict[str, HeaderValue]
    body: bytes


def signed_message(
    *,
    exchange: str,
    routing_key: str,
    body: bytes,
    headers: Mapping[str, HeaderValue],
    tenant: str | None,
    request_id: str,
    signer: MessageSigner,
    now: int,
) -> OutgoingMessage:
    """The one envelope of every message Fetcher publishes, as the reference builds it: the
    caller's ``headers``, then ``X-Tenant-ID`` (when there is a tenant), ``X-Request-Id`` (a new
    one when empty) and ``x-retry-count`` 0, then the signature headers over the six-line
    payload with the signed tenant (empty without one)."""
    envelope: dict[str, HeaderValue] = dict(headers)
    if tenant is not None:
        envelope[TENANT_HEADER] = tenant
    envelope[REQUEST_ID_HEADER] = request_id or str(uuid4())
    envelope[RETRY_COUNT_HEADER] = 0
    envelope.update(
        signer.sign(
            tenant=tenant or "",
            exchange=exchange,
            routing_key=routing_key,
            body=body,
            timestamp=now,
        )
    )
    return OutgoingMessage(exchange=exchange, routing_key=routing_key, headers=envelope, body=body)


def joined_trace(job: Job, trace_context: TraceCarrier | None) -> dict[str, str]:
    """The trace headers of a message about ``job``: ``trace_context``'s, by default those
    recorded with the request (an empty context: none)."""
    return trace_headers(job.trace_context if trace_context is None else trace_context)


def header_text(value: object) -> str:
    """A header value as text, whether it came as a byte array or a string."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)
