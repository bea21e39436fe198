"""Job events and audit checkpoints on the wire: signed CloudEvents 1.0 in RabbitMQ binary
content mode (reference §5.2), and the job events' bodies (§5.3).

The SDK's RabbitMQ binding turns the event into ``ce-*`` headers and the body. Three of its
choices differ from the reference and are adapted here, where it hands the headers over: it
gives header values as strings (the reference sends each ``ce-*`` value as a byte array of
UTF-8 text), it moves ``datacontenttype`` into the AMQP ``content_type`` property (the
reference also sends ``ce-datacontenttype``), and it prints ``time`` with Python's
``isoformat`` (the reference prints Go ``RFC3339Nano``, trailing fractional zeros dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from cloudevents.core.bindings import rabbitmq
from cloudevents.core.v1.event import CloudEvent

from adapters.messaging.wire.envelope import (
    CONTENT_TYPE,
    HeaderValue,
    OutgoingMessage,
    header_text,
    joined_trace,
    signed_message,
)
from application.audit.witness import witness_body
from application.ports.signer import MessageSigner
from application.ports.tracer import TraceCarrier, trace_headers
from application.timefmt import rfc3339nano
from domain import gojson
from domain.audit_chain import Checkpoint
from domain.job import Job, Phase
from domain.request import thaw
from domain.tenant import Tenant

EVENTS_EXCHANGE = "fetcher.job.events"
JOB_STATUSES = frozenset({"completed", "failed"})
SCHEMA_VERSION = "1.0.0"
RESOURCE_TYPE = "job"


@dataclass(frozen=True, slots=True)
class JobNotification:
    """A terminal job event as it is announced: ``body`` is the exact JSON that is signed and
    sent; the event names ``tenant`` (``single-tenant`` for the single tenant)."""

    job_id: UUID
    status: str
    body: bytes
    time: datetime
    request_id: str = ""
    trace_context: dict[str, str] = field(default_factory=dict)
    tenant: Tenant = field(kw_only=True)


def notification_body(job: Job) -> bytes:
    """``job.completed``/``job.failed`` body: a Go struct, so top-level fields keep this order."""
    metadata = dict(thaw(job.request.metadata))
    if job.phase is Phase.FAILED:
        metadata["error"] = {"message": job.error or ""}
        fields = [
            ("jobId", gojson.encode_string(str(job.id))),
            ("metadata", gojson.encode(metadata)),
            ("status", gojson.encode_string("failed")),
        ]
        return gojson.encode_ordered(fields).encode("utf-8")
    if job.phase is not Phase.COMPLETED or job.result is None or job.finished_at is None:
        raise ValueError(f"job {job.id} has not ended")
    result = job.result
    result_fields = [("path", gojson.encode_string(result.path))]
    if result.size_bytes:
        result_fields.append(("sizeBytes", str(result.size_bytes)))
    if result.row_count:
        result_fields.append(("rowCount", str(result.row_count)))
    result_fields += [
        ("format", '"json"'),
        ("hmac", gojson.encode_string(result.hmac)),
        (
            "integrity",
            gojson.encode_ordered(
                [("algorithm", '"HMAC-SHA256"'), ("signature", gojson.encode_string(result.hmac))]
            ),
        ),
        (
            "protection",
            '{"encrypted":true,"mode":"adapter-managed","appliedBy":"adapter"}',
        ),
    ]
    fields = [
        ("jobId", gojson.encode_string(str(job.id))),
        ("metadata", gojson.encode(metadata)),
        ("status", '"completed"'),
        ("result", gojson.encode_ordered(result_fields)),
    ]
    if job.execution_time_ms:
        fields.append(("executionTimeMs", str(job.execution_time_ms)))
    fields.append(("completedAt", gojson.encode_string(rfc3339nano(job.finished_at))))
    return gojson.encode_ordered(fields).encode("utf-8")


def job_notification(job: Job, trace_context: TraceCarrier | None = None) -> JobNotification:
    """The event of ``job``, which has ended: its body, its time (when it ended), the id of
    the request that asked for it, ``trace_context`` (by default the one recorded with the
    request) and its tenant."""
    if job.finished_at is None:
        raise ValueError(f"job {job.id} has not ended")
    return JobNotification(
        job_id=job.id,
        status=job.status,
        body=notification_body(job),
        time=job.finished_at,
        request_id=job.request_id,
        trace_context=joined_trace(job, trace_context),
        tenant=job.tenant,
    )


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
    headers, body = _binary_mode(event, rfc3339nano(notification.time))
    headers.update(trace_headers(notification.trace_context))
    return signed_message(
        exchange=exchange,
        routing_key=f"job.{status}",
        body=body,
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
    headers, body = _binary_mode(event, checkpoint.recorded_at)
    return signed_message(
        exchange=exchange,
        routing_key=CHECKPOINT_ROUTING_KEY,
        body=body,
        headers=headers,
        tenant=None,
        request_id="",
        signer=signer,
        now=now,
    )


@dataclass(frozen=True, slots=True)
class EventMessages:
    """The CloudEvents a publisher sends to the events ``exchange``, from ``source``, signed by
    ``signer`` at ``clock``'s time (Unix seconds)."""

    source: str
    exchange: str
    signer: MessageSigner
    clock: Callable[[], int]

    def of(self, job: Job, trace_context: TraceCarrier | None = None) -> OutgoingMessage:
        """The event of ``job``, which has ended, joining ``trace_context`` (by default the
        request's)."""
        return job_event_message(
            job_notification(job, trace_context),
            source=self.source,
            exchange=self.exchange,
            signer=self.signer,
            now=self.clock(),
        )

    def of_checkpoint(self, checkpoint: Checkpoint) -> OutgoingMessage:
        return checkpoint_event_message(
            checkpoint,
            source=self.source,
            exchange=self.exchange,
            signer=self.signer,
            now=self.clock(),
        )


def _binary_mode(event: CloudEvent, time: str) -> tuple[dict[str, HeaderValue], bytes]:
    """The SDK's binary mode of ``event`` as the reference sends it (see above): every
    ``ce-*`` value as UTF-8 bytes, ``ce-time`` as ``time``, ``ce-datacontenttype`` kept."""
    binary = rabbitmq.to_binary_event(event)
    headers: dict[str, HeaderValue] = {name: _utf8(value) for name, value in binary.headers.items()}
    headers["ce-time"] = _utf8(time)
    headers["ce-datacontenttype"] = _utf8(binary.content_type or CONTENT_TYPE)
    return headers, binary.body


def _utf8(value: object) -> bytes:
    """A ``ce-*`` value as the reference sends it: the UTF-8 bytes of its text."""
    return header_text(value).encode("utf-8")
