"""Work messages (§4.8) and job events (§5.2) carry the request id and the W3C trace headers,
and opening a work message gives them back; the signature does not depend on them."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from adapters.crypto.keys import KeyRing
from adapters.crypto.signing import HmacMessageSigner
from adapters.messaging.wire.events import JobNotification, job_event_message
from adapters.messaging.wire.work import open_work_message, work_message
from application.ports.messaging import WorkOrder
from domain.tenant import SINGLE_TENANT

RING = KeyRing("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
JOB_ID = UUID("0190b8a0-0000-7000-8000-000000000001")
QUEUE = "fetcher.extract-external-data.queue"
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
NOW = 1_780_000_000
BODY = b'{"jobId":"0190b8a0-0000-7000-8000-000000000001","mappedFields":{}}'


def test_a_work_message_carries_request_id_and_trace_headers_and_opens_with_them():
    signer = HmacMessageSigner.from_ring(RING, "internal")
    order = WorkOrder(
        JOB_ID,
        request_id="req-42",
        trace_context={"traceparent": PARENT, "tracestate": "k=v", "baggage": "no"},
        tenant=SINGLE_TENANT,
    )
    message = work_message(order, BODY, queue=QUEUE, signer=signer, now=NOW)
    assert message.headers["X-Request-Id"] == "req-42"
    assert message.headers["traceparent"] == PARENT
    assert message.headers["tracestate"] == "k=v"
    assert "baggage" not in message.headers
    opened = open_work_message(
        headers={k: v.encode() if isinstance(v, str) else v for k, v in message.headers.items()},
        body=message.body,
        exchange="",
        routing_key=QUEUE,
        signer=signer,
        now=NOW,
    )
    assert opened.request_id == "req-42"
    assert opened.trace_context == {"traceparent": PARENT, "tracestate": "k=v"}


def test_without_a_trace_a_work_message_has_no_trace_headers_and_a_generated_request_id():
    signer = HmacMessageSigner.from_ring(RING, "internal")
    message = work_message(
        WorkOrder(JOB_ID, tenant=SINGLE_TENANT), BODY, queue=QUEUE, signer=signer, now=NOW
    )
    assert "traceparent" not in message.headers and "tracestate" not in message.headers
    assert UUID(str(message.headers["X-Request-Id"]))
    untraced = WorkOrder(
        JOB_ID, request_id="r", trace_context={"traceparent": PARENT}, tenant=SINGLE_TENANT
    )
    traced = work_message(untraced, BODY, queue=QUEUE, signer=signer, now=NOW)
    assert traced.headers["x-message-signature"] == message.headers["x-message-signature"]


def test_a_job_event_carries_request_id_and_trace_headers():
    signer = HmacMessageSigner.from_ring(RING, "external")
    note = JobNotification(
        job_id=JOB_ID,
        status="failed",
        body=b'{"jobId":"0190b8a0-0000-7000-8000-000000000001","metadata":{},"status":"failed"}',
        time=datetime(2026, 7, 13, tzinfo=UTC),
        request_id="req-42",
        trace_context={"traceparent": PARENT},
        tenant=SINGLE_TENANT,
    )
    message = job_event_message(
        note,
        source="//lerian.fetcher/worker",
        exchange="fetcher.job.events",
        signer=signer,
        now=NOW,
    )
    assert message.headers["X-Request-Id"] == "req-42"
    assert message.headers["traceparent"] == PARENT
    assert "tracestate" not in message.headers
