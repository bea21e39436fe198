"""Job events as CloudEvents 1.0 in RabbitMQ binary content mode (reference §5.2).

The SDK's RabbitMQ binding turns the event into ``ce-*`` headers and the body. Three of its
choices differ from the reference and are adapted here, where it hands the headers over: it
gives header values as strings (the reference sends each ``ce-*`` value as a byte array of
UTF-8 text), it moves ``datacontenttype`` into the AMQP ``content_type`` property (the
reference also sends ``ce-datacontenttype``), and it prints ``time`` with Python's
``isoformat`` (the reference prints Go ``RFC3339Nano``, trailing fractional zeros dropped).
"""

from __future__ import annotations

from datetime import datetime

from cloudevents.core.bindings import rabbitmq
from cloudevents.core.v1.event import CloudEvent

from adapters.messaging.envelope import (
    HeaderValue,
    OutgoingMessage,
    header_text,
    signed_message,
)
from application.audit.witness import witness_body
from application.ports.messaging import JobNotification
from application.ports.signer import MessageSigner
from application.ports.tracer import trace_headers
from application.timefmt import rfc3339nano
from domain.audit_chain import Checkpoint

JOB_STATUSES = frozenset({"completed", "failed"})
CONTENT_TYPE = "application/json"
SCHEMA_VERSION = "1.0.0"
RESOURCE_TYPE = "job"


def event_id(status: str, job_id: object) -> str:
    """The deterministic CloudEvents id: a consumer's dedup key."""
    return f"fetcher.job.{status}.{job_id}"


def job_event_message(
    notification: JobNotification,
    *,
    source: str,
    exchange: str,
    signer: MessageSigner,
    now: int,
) -> OutgoingMessage:
    """The headers and body of one ``job.<status>`` event, signed with ``signer``. The event
    names its tenant (``ce-tenantid``, ``X-Tenant-ID``, the signed tenant line):
    ``single-tenant`` for the single tenant, else the tenant id."""
    status = notification.status
    if status not in JOB_STATUSES:
        raise ValueError(f"not a terminal job status: {status!r}")
    job_id = str(notification.job_id)
    event = CloudEvent(
        attributes={
            "specversion": "1.0",
            "id": event_id(status, job_id),
            "source": source,
            "type": f"studio.lerian.{RESOURCE_TYPE}.{status}",
            "time": notification.time,
            "subject": job_id,
            "datacontenttype": CONTENT_TYPE,
            "schemaversion": SCHEMA_VERSION,
            "resourcetype": RESOURCE_TYPE,
            "eventtype": status,
            "tenantid": notification.tenant.label,
        },
        data=notification.body,
    )
    binary = rabbitmq.to_binary_event(event)

    headers: dict[str, HeaderValue] = {name: _utf8(value) for name, value in binary.headers.items()}
    headers["ce-time"] = _utf8(rfc3339nano(notification.time))
    headers["ce-datacontenttype"] = _utf8(binary.content_type or CONTENT_TYPE)
    headers.update(trace_headers(notification.trace_context))
    return signed_message(
        exchange=exchange,
        routing_key=f"job.{status}",
        body=binary.body,
        headers=headers,
        tenant=notification.tenant.label,
        request_id=notification.request_id,
        signer=signer,
        now=now,
    )


CHECKPOINT_ROUTING_KEY = "audit.checkpoint"
CHECKPOINT_TYPE = "studio.lerian.audit.checkpoint"


def checkpoint_event_message(
    checkpoint: Checkpoint,
    *,
    source: str,
    exchange: str,
    signer: MessageSigner,
    now: int,
) -> OutgoingMessage:
    """An audit checkpoint as a signed CloudEvent (``audit.checkpoint`` on the events exchange,
    the job events' header and signature scheme): its body is the checkpoint as signed,
    without the job ids of its heads; its id ``fetcher.audit.checkpoint.<position>`` is a
    consumer's dedup key. The whole log's, so it names no tenant."""
    event = CloudEvent(
        attributes={
            "specversion": "1.0",
            "id": f"fetcher.audit.checkpoint.{checkpoint.position}",
            "source": source,
            "type": CHECKPOINT_TYPE,
            "time": datetime.fromisoformat(checkpoint.recorded_at),
            "subject": str(checkpoint.position),
            "datacontenttype": CONTENT_TYPE,
            "schemaversion": SCHEMA_VERSION,
            "resourcetype": "audit",
            "eventtype": "checkpoint",
        },
        data=witness_body(checkpoint),
    )
    binary = rabbitmq.to_binary_event(event)
    headers: dict[str, HeaderValue] = {name: _utf8(value) for name, value in binary.headers.items()}
    headers["ce-time"] = _utf8(checkpoint.recorded_at)
    headers["ce-datacontenttype"] = _utf8(binary.content_type or CONTENT_TYPE)
    return signed_message(
        exchange=exchange,
        routing_key=CHECKPOINT_ROUTING_KEY,
        body=binary.body,
        headers=headers,
        tenant=None,
        request_id="",
        signer=signer,
        now=now,
    )


def _utf8(value: object) -> bytes:
    """A ``ce-*`` value as the reference sends it: the UTF-8 bytes of its text."""
    return header_text(value).encode("utf-8")
