"""The bodies the publishers build from a job, byte for byte (reference §4.8, §5.3), and what
they take from the job besides: the event's time, the request id, the trace to join."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pytest

from adapters.messaging.wire.events import job_notification, notification_body
from adapters.messaging.wire.work import work_order, work_order_body
from application.ports.messaging import WorkOrder
from domain.tenant import Tenant
from tests.support.jobs import ended_job, requested_job
from tests.unit.adapters.messaging.test_envelope import FAILED_BODY

JOB_ID = UUID("0190b8a0-0000-7000-8000-000000000001")
HMAC = "ab" * 32
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_work_order_body_is_a_go_map_with_filters_before_the_job_id() -> None:
    job = requested_job(JOB_ID, filters={"db": {"t": {"a": {"gte": [1.5], "eq": ["x", 2]}}}})
    assert work_order_body(job) == (
        b'{"createdAt":"2026-07-13T13:00:00.1234Z",'
        b'"filters":{"db":{"t":{"a":{"eq":["x",2],"gte":[1.5]}}}},'
        b'"jobId":"0190b8a0-0000-7000-8000-000000000001","mappedFields":{"db":{"t":["a"]}},'
        b'"metadata":{"source":"payments"}}'
    )


def test_the_work_order_body_has_no_filters_key_without_filters_and_escapes_as_go() -> None:
    job = requested_job(JOB_ID, metadata={"source": "payments", "note": "<&>"})
    assert work_order_body(job) == (
        b'{"createdAt":"2026-07-13T13:00:00.1234Z",'
        b'"jobId":"0190b8a0-0000-7000-8000-000000000001","mappedFields":{"db":{"t":["a"]}},'
        b'"metadata":{"note":"\\u003c\\u0026\\u003e","source":"payments"}}'
    )


def test_the_completed_body_keeps_the_reference_structs_field_order() -> None:
    ended = datetime(2026, 7, 13, 13, 0, 1, 500000, tzinfo=UTC)
    job = ended_job("completed", JOB_ID, finished_at=ended)
    assert notification_body(job) == (
        b'{"jobId":"0190b8a0-0000-7000-8000-000000000001","metadata":{"source":"payments"},'
        b'"status":"completed","result":{'
        b'"path":"external-data/0190b8a0-0000-7000-8000-000000000001.json",'
        b'"sizeBytes":120,"rowCount":5,"format":"json",'
        b'"hmac":"' + HMAC.encode() + b'",'
        b'"integrity":{"algorithm":"HMAC-SHA256","signature":"' + HMAC.encode() + b'"},'
        b'"protection":{"encrypted":true,"mode":"adapter-managed","appliedBy":"adapter"}},'
        b'"executionTimeMs":250,"completedAt":"2026-07-13T13:00:01.5Z"}'
    )


def test_the_failed_body_puts_the_error_in_the_metadata() -> None:
    assert notification_body(ended_job("failed", JOB_ID, error="boom")) == FAILED_BODY


def test_a_job_that_has_not_ended_has_no_event() -> None:
    with pytest.raises(ValueError, match="has not ended"):
        job_notification(requested_job(JOB_ID))


def test_the_event_is_timed_when_the_job_ended_and_carries_its_request_and_tenant() -> None:
    ended = datetime(2026, 7, 13, 13, 0, 2, tzinfo=UTC)
    job = ended_job(
        "failed",
        JOB_ID,
        finished_at=ended,
        request_id="req-7",
        tenant=Tenant("tenant-b"),
        trace_context={"traceparent": PARENT, "baggage": "no"},
    )
    note = job_notification(job)
    assert (note.job_id, note.status, note.time) == (JOB_ID, "failed", ended)
    assert (note.request_id, note.tenant) == ("req-7", Tenant("tenant-b"))
    assert note.body == notification_body(job)
    assert note.trace_context == {"traceparent": PARENT}  # the request's, trace headers only
    assert job_notification(job, {}).trace_context == {}  # tracing off where it is published
    assert job_notification(job, {"traceparent": "00-x"}).trace_context == {"traceparent": "00-x"}


def test_the_work_order_joins_the_given_trace_or_else_the_requests() -> None:
    job = requested_job(JOB_ID, request_id="req-7", trace_context={"traceparent": PARENT})
    assert work_order(job) == WorkOrder(JOB_ID, "req-7", {"traceparent": PARENT}, tenant=job.tenant)
    assert work_order(job, {}).trace_context == {}
    assert work_order(job, {"tracestate": "k=v"}).trace_context == {"tracestate": "k=v"}
