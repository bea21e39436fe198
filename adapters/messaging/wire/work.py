"""The work order on the wire (reference §4.8): its body, its headers, and opening it again.

Opening is shared by the RabbitMQ consumer and its in-process twin: the signature is checked
first (``max_age=None``: a queued job does not expire), then the body's ``jobId``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from uuid import UUID

from adapters.messaging.wire.envelope import (
    REQUEST_ID_HEADER,
    TENANT_HEADER,
    OutgoingMessage,
    header_text,
    joined_trace,
    signed_message,
)
from application.ports.messaging import WorkOrder
from application.ports.signer import MessageSigner
from application.ports.tracer import TRACE_HEADERS, TraceCarrier, trace_headers
from application.timefmt import rfc3339nano
from domain import gojson
from domain.job import Job
from domain.request import filters_json
from domain.tenant import SINGLE_TENANT, Tenant, is_valid_tenant_id

WORK_QUEUE = "fetcher.extract-external-data.queue"


def work_order_body(job: Job) -> bytes:
    """Go JSON of a map, so keys in order: ``createdAt``, ``filters`` (when there are any, each
    condition as the reference's struct encodes it), ``jobId``, ``mappedFields``, ``metadata``."""
    request = job.request
    fields = [("createdAt", gojson.encode_string(rfc3339nano(job.created_at)))]
    if request.filters:
        fields.append(("filters", filters_json(request.filters)))
    fields += [
        ("jobId", gojson.encode_string(str(job.id))),
        ("mappedFields", gojson.encode(request.mapped_fields)),
        ("metadata", gojson.encode(request.metadata)),
    ]
    return gojson.encode_ordered(fields).encode("utf-8")


def work_order(job: Job, trace_context: TraceCarrier | None = None) -> WorkOrder:
    """What the work message of ``job`` tells its consumer: the job, the id of the request
    that asked for it, ``trace_context`` (by default the one recorded with the request) and
    its tenant."""
    return WorkOrder(
        job_id=job.id,
        request_id=job.request_id,
        trace_context=joined_trace(job, trace_context),
        tenant=job.tenant,
    )


def work_message(
    order: WorkOrder, body: bytes, *, queue: str, signer: MessageSigner, now: int
) -> OutgoingMessage:
    """A job message for the default exchange, routed straight to ``queue``. The order's
    tenant is carried in ``X-Tenant-ID`` and signed; the single tenant's messages carry none,
    so their signed tenant is empty (the reference's single-tenant mode)."""
    return signed_message(
        exchange="",
        routing_key=queue,
        body=body,
        headers={"jobId": str(order.job_id), **trace_headers(order.trace_context)},
        tenant=None if order.tenant.is_single else order.tenant.id,
        request_id=order.request_id,
        signer=signer,
        now=now,
    )


@dataclass(frozen=True, slots=True)
class WorkMessages:
    """The work messages a publisher sends to ``queue``, signed by ``signer`` at ``clock``'s
    time (Unix seconds)."""

    queue: str
    signer: MessageSigner
    clock: Callable[[], int]

    def of(self, job: Job, trace_context: TraceCarrier | None = None) -> OutgoingMessage:
        """The work message of ``job``, joining ``trace_context`` (by default the request's)."""
        return work_message(
            work_order(job, trace_context),
            work_order_body(job),
            queue=self.queue,
            signer=self.signer,
            now=self.clock(),
        )


class UnreadableMessage(Exception):
    """A correctly signed work message without a usable ``jobId`` in its body, or with a
    tenant header that is no tenant id."""


def open_work_message(
    *,
    headers: Mapping[str, object],
    body: bytes,
    exchange: str,
    routing_key: str,
    signer: MessageSigner,
    now: int,
) -> WorkOrder:
    """Verify and parse one delivery. Raises ``InvalidSignature`` or ``UnreadableMessage``.
    The order's tenant is the signed ``X-Tenant-ID`` (none: the single tenant)."""
    signer.verify(
        headers=headers,
        exchange=exchange,
        routing_key=routing_key,
        body=body,
        now=now,
        max_age=None,
    )
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise UnreadableMessage("body is not JSON") from e
    raw = document.get("jobId") if isinstance(document, dict) else None
    if not isinstance(raw, str):
        raise UnreadableMessage("body has no string jobId")
    try:
        job_id = UUID(raw)
    except ValueError as e:
        raise UnreadableMessage("jobId is not a UUID") from e
    return WorkOrder(
        job_id=job_id,
        request_id=header_text(headers.get(REQUEST_ID_HEADER)),
        trace_context={
            name: header_text(headers[name]) for name in TRACE_HEADERS if headers.get(name)
        },
        tenant=_tenant(headers.get(TENANT_HEADER)),
    )


def _tenant(value: object) -> Tenant:
    if value is None:
        return SINGLE_TENANT
    text = header_text(value)
    if not text:
        return SINGLE_TENANT
    if not is_valid_tenant_id(text):
        raise UnreadableMessage("the tenant header is not a tenant id")
    return Tenant(text)
