"""The AMQP envelopes are pinned header by header against the reference (§4.8, §5.2, §5.5)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

import pytest
from cloudevents.core.bindings import rabbitmq

from adapters.messaging.delivery import DeliveryProcessor
from adapters.messaging.wire.envelope import header_text
from adapters.messaging.wire.events import JobNotification, job_event_message
from adapters.messaging.wire.work import UnreadableMessage, open_work_message, work_message
from application.errors import InvalidSignature
from application.ports.messaging import Settlement, WorkOrder
from application.timefmt import rfc3339nano
from domain.errors import Unavailable
from domain.tenant import SINGLE_TENANT
from tests.support.signing import KEY, HmacTestSigner

JOB_ID = UUID("0190b8a0-0000-7000-8000-000000000001")
NOW = 1_780_000_000
SOURCE = "//lerian.fetcher/worker"
EXCHANGE = "fetcher.job.events"
QUEUE = "fetcher.extract-external-data.queue"
FAILED_BODY = (
    b'{"jobId":"0190b8a0-0000-7000-8000-000000000001",'
    b'"metadata":{"error":{"message":"boom"},"source":"payments"},"status":"failed"}'
)
WORK_BODY = (
    b'{"createdAt":"2026-07-13T13:00:00.123456789Z","jobId":"0190b8a0-0000-7000-8000-'
    b'000000000001","mappedFields":{"db":{"t":["a"]}},"metadata":{"source":"payments"}}'
)


def _expected_mac(t: int, tenant: str, exchange: str, routing_key: str, body: bytes) -> str:
    payload = (
        str(t).encode()
        + b"\nv1\n"
        + tenant.encode()
        + b"\n0190b8a0-0000-7000-8000-000000000001\n"
        + exchange.encode()
        + b"\n"
        + routing_key.encode()
        + b"\n"
        + body
    )
    return hmac.new(KEY, payload, hashlib.sha256).hexdigest()


def _notification(**overrides: object) -> JobNotification:
    values: dict[str, object] = {
        "job_id": JOB_ID,
        "status": "failed",
        "body": FAILED_BODY,
        "time": datetime(2026, 7, 13, 13, 0, 0, 123400, tzinfo=UTC),
        "request_id": "req-1",
        "tenant": SINGLE_TENANT,
    }
    values.update(overrides)
    return JobNotification(**values)  # type: ignore[arg-type]


def test_event_headers_are_exactly_the_reference_set() -> None:
    message = job_event_message(
        _notification(), source=SOURCE, exchange=EXCHANGE, signer=HmacTestSigner(), now=NOW
    )

    assert message.exchange == EXCHANGE
    assert message.routing_key == "job.failed"
    assert message.body == FAILED_BODY
    assert message.headers == {
        "ce-specversion": b"1.0",
        "ce-id": b"fetcher.job.failed.0190b8a0-0000-7000-8000-000000000001",
        "ce-source": SOURCE.encode(),
        "ce-type": b"studio.lerian.job.failed",
        "ce-time": b"2026-07-13T13:00:00.1234Z",
        "ce-subject": b"0190b8a0-0000-7000-8000-000000000001",
        "ce-datacontenttype": b"application/json",
        "ce-schemaversion": b"1.0.0",
        "ce-resourcetype": b"job",
        "ce-eventtype": b"failed",
        "ce-tenantid": b"single-tenant",
        "X-Tenant-ID": "single-tenant",
        "X-Request-Id": "req-1",
        "x-retry-count": 0,
        "x-message-signature": _expected_mac(
            NOW, "single-tenant", EXCHANGE, "job.failed", FAILED_BODY
        ),
        "t": str(NOW),
        "signature-version": "v1",
    }


def test_event_signature_covers_tenant_exchange_routing_key_and_exact_body() -> None:
    signer = HmacTestSigner()
    body = b'{"jobId":"0190b8a0-0000-7000-8000-000000000001","metadata":{},"status":"completed"}'
    message = job_event_message(
        _notification(status="completed", body=body),
        source=SOURCE,
        exchange="custom.events",
        signer=signer,
        now=NOW,
    )

    assert signer.calls == [
        {
            "tenant": "single-tenant",
            "exchange": "custom.events",
            "routing_key": "job.completed",
            "body": body,
        }
    ]
    assert message.headers["x-message-signature"] == _expected_mac(
        NOW, "single-tenant", "custom.events", "job.completed", body
    )
    assert message.headers["ce-type"] == b"studio.lerian.job.completed"
    assert message.headers["ce-eventtype"] == b"completed"
    assert message.routing_key == "job.completed"


def test_event_header_values_are_byte_arrays_for_ce_strings_otherwise_and_an_int_retry_count() -> (
    None
):
    message = job_event_message(
        _notification(), source=SOURCE, exchange=EXCHANGE, signer=HmacTestSigner(), now=NOW
    )

    kinds = {name: type(value) for name, value in message.headers.items()}
    assert {name for name, kind in kinds.items() if kind is bytes} == {
        name for name in kinds if name.startswith("ce-")
    }
    assert {name for name, kind in kinds.items() if kind is str} == {
        "X-Tenant-ID", "X-Request-Id", "x-message-signature", "t", "signature-version"
    }  # fmt: skip
    assert kinds["x-retry-count"] is int and message.headers["x-retry-count"] == 0


def test_event_id_is_deterministic_and_request_id_generated_when_missing() -> None:
    first = job_event_message(
        _notification(request_id=""),
        source=SOURCE,
        exchange=EXCHANGE,
        signer=HmacTestSigner(),
        now=NOW,
    )
    second = job_event_message(
        _notification(request_id=""),
        source=SOURCE,
        exchange=EXCHANGE,
        signer=HmacTestSigner(),
        now=NOW + 5,
    )

    assert first.headers["ce-id"] == second.headers["ce-id"]
    assert UUID(str(first.headers["X-Request-Id"]))
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 7, 13, 13, 0, 0, tzinfo=UTC), "2026-07-13T13:00:00Z"),
        (datetime(2026, 7, 13, 13, 0, 0, 120000, tzinfo=UTC), "2026-07-13T13:00:00.12Z"),
        (datetime(2026, 7, 13, 13, 0, 0, 1, tzinfo=UTC), "2026-07-13T13:00:00.000001Z"),
        (
            datetime(2026, 7, 13, 10, 0, 0, 500000, tzinfo=timezone(timedelta(hours=-3))),
            "2026-07-13T13:00:00.5Z",
        ),
    ],
)
def test_ce_time_is_go_rfc3339nano_in_utc(moment: datetime, text: str) -> None:
    assert rfc3339nano(moment) == text
    message = job_event_message(
        _notification(time=moment),
        source=SOURCE,
        exchange=EXCHANGE,
        signer=HmacTestSigner(),
        now=NOW,
    )
    assert message.headers["ce-time"] == text.encode()


def test_event_reads_back_with_the_cloudevents_binding() -> None:
    message = job_event_message(
        _notification(), source=SOURCE, exchange=EXCHANGE, signer=HmacTestSigner(), now=NOW
    )
    incoming = rabbitmq.RabbitMQMessage(
        headers={k: header_text(v) for k, v in message.headers.items()},
        content_type="application/json",
        body=message.body,
    )

    event = rabbitmq.from_binary_event(incoming)

    assert event.get_id() == "fetcher.job.failed.0190b8a0-0000-7000-8000-000000000001"
    assert event.get_type() == "studio.lerian.job.failed"
    assert event.get_extension("tenantid") == "single-tenant"
    assert event.get_data() == json.loads(FAILED_BODY)


def test_event_for_a_non_terminal_status_is_refused() -> None:
    with pytest.raises(ValueError, match="terminal"):
        job_event_message(
            _notification(status="processing"),
            source=SOURCE,
            exchange=EXCHANGE,
            signer=HmacTestSigner(),
            now=NOW,
        )


def test_work_message_headers_match_the_reference() -> None:
    order = WorkOrder(job_id=JOB_ID, request_id="req-7", tenant=SINGLE_TENANT)

    message = work_message(order, WORK_BODY, queue=QUEUE, signer=HmacTestSigner(), now=NOW)

    assert message.exchange == ""
    assert message.routing_key == QUEUE
    assert message.body == WORK_BODY
    assert message.headers == {
        "jobId": "0190b8a0-0000-7000-8000-000000000001",
        "X-Request-Id": "req-7",
        "x-retry-count": 0,
        "x-message-signature": _expected_mac(NOW, "", "", QUEUE, WORK_BODY),
        "t": str(NOW),
        "signature-version": "v1",
    }


def test_work_message_generates_a_request_id_when_missing() -> None:
    message = work_message(
        WorkOrder(job_id=JOB_ID, tenant=SINGLE_TENANT),
        WORK_BODY,
        queue=QUEUE,
        signer=HmacTestSigner(),
        now=NOW,
    )
    assert UUID(str(message.headers["X-Request-Id"]))


@pytest.mark.parametrize("array", [bytes, bytearray])
def test_open_work_message_accepts_go_style_byte_headers(array: type) -> None:
    signer = HmacTestSigner()
    message = work_message(
        WorkOrder(job_id=JOB_ID, request_id="req-7", tenant=SINGLE_TENANT),
        WORK_BODY,
        queue=QUEUE,
        signer=signer,
        now=NOW,
    )
    as_bytes = {
        k: array(v.encode()) if isinstance(v, str) else v for k, v in message.headers.items()
    }

    order = open_work_message(
        headers=as_bytes,
        body=WORK_BODY,
        exchange="",
        routing_key=QUEUE,
        signer=signer,
        now=NOW + 86_400,
    )

    assert order == WorkOrder(job_id=JOB_ID, request_id="req-7", tenant=SINGLE_TENANT)


def test_open_work_message_rejects_a_tampered_body() -> None:
    signer = HmacTestSigner()
    message = work_message(
        WorkOrder(job_id=JOB_ID, tenant=SINGLE_TENANT),
        WORK_BODY,
        queue=QUEUE,
        signer=signer,
        now=NOW,
    )

    with pytest.raises(InvalidSignature):
        open_work_message(
            headers=message.headers,
            body=WORK_BODY.replace(b"payments", b"paymentz"),
            exchange="",
            routing_key=QUEUE,
            signer=signer,
            now=NOW,
        )


def test_open_work_message_rejects_another_routing_key() -> None:
    signer = HmacTestSigner()
    message = work_message(
        WorkOrder(job_id=JOB_ID, tenant=SINGLE_TENANT),
        WORK_BODY,
        queue=QUEUE,
        signer=signer,
        now=NOW,
    )

    with pytest.raises(InvalidSignature):
        open_work_message(
            headers=message.headers,
            body=WORK_BODY,
            exchange="",
            routing_key="other.queue",
            signer=signer,
            now=NOW,
        )


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"jobId":7}', b'{"jobId":"nope"}'])
def test_open_work_message_refuses_a_body_without_a_job_id(body: bytes) -> None:
    signer = HmacTestSigner()
    headers = signer.sign(tenant="", exchange="", routing_key=QUEUE, body=body, timestamp=NOW)

    with pytest.raises(UnreadableMessage):
        open_work_message(
            headers=headers, body=body, exchange="", routing_key=QUEUE, signer=signer, now=NOW
        )


async def _process(
    deliveries: DeliveryProcessor, body: bytes = WORK_BODY, **kw: object
) -> Settlement:
    signer = HmacTestSigner()
    headers = kw.pop("headers", None) or signer.sign(
        tenant="", exchange="", routing_key=QUEUE, body=body, timestamp=NOW
    )
    return await deliveries.process(
        headers=headers,  # type: ignore[arg-type]
        body=body,
        exchange="",
        routing_key=QUEUE,
        stopping=kw.pop("stopping", None) or asyncio.Event(),  # type: ignore[arg-type]
    )


def _deliveries(handler: object, **kw: float) -> DeliveryProcessor:
    return DeliveryProcessor(
        signer=HmacTestSigner(),
        handler=handler,  # type: ignore[arg-type]
        clock=lambda: NOW,
        retry_delay=kw.get("retry_delay", 0.0),
        error_backoff=kw.get("error_backoff", 0.0),
        max_backoff=kw.get("max_backoff", 0.0),
    )


@pytest.mark.parametrize("settlement", list(Settlement))
async def test_delivery_is_settled_as_the_handler_says(settlement: Settlement) -> None:
    seen: list[WorkOrder] = []

    async def handler(order: WorkOrder) -> Settlement:
        seen.append(order)
        return settlement

    assert await _process(_deliveries(handler)) is settlement
    assert [o.job_id for o in seen] == [JOB_ID]


async def test_a_bad_signature_is_dead_lettered_without_calling_the_handler() -> None:
    async def handler(order: WorkOrder) -> Settlement:
        raise AssertionError("must not be called")

    headers = {"x-message-signature": "0" * 64, "t": str(NOW), "signature-version": "v1"}
    assert await _process(_deliveries(handler), headers=headers) is Settlement.DEAD_LETTER


async def test_a_handler_error_requeues_after_a_bounded_backoff() -> None:
    async def handler(order: WorkOrder) -> Settlement:
        raise RuntimeError("secret-bearing text that is not logged")

    deliveries = _deliveries(handler, error_backoff=0.01, max_backoff=0.02)
    assert await _process(deliveries) is Settlement.REQUEUE
    assert [deliveries._backoff(JOB_ID) for _ in range(3)] == [0.02, 0.02, 0.02]


async def test_the_requeue_delay_ends_early_when_stopping() -> None:
    async def handler(order: WorkOrder) -> Settlement:
        stopping.set()
        return Settlement.REQUEUE

    stopping = asyncio.Event()
    deliveries = _deliveries(handler, retry_delay=60.0)
    result = await asyncio.wait_for(_process(deliveries, stopping=stopping), timeout=5)
    assert result is Settlement.REQUEUE


@pytest.mark.parametrize(
    ("error", "level"), [(Unavailable(), "WARNING"), (RuntimeError("bug"), "ERROR")]
)
async def test_a_dependency_outage_in_the_handler_is_a_warning_a_fault_an_error(
    error: Exception, level: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(order: WorkOrder) -> Settlement:
        raise error

    with caplog.at_level(logging.INFO, logger="adapters.messaging.delivery"):
        assert await _process(_deliveries(handler)) is Settlement.REQUEUE
    failed = [r for r in caplog.records if "work handler failed" in r.getMessage()]
    assert [r.levelname for r in failed] == [level]
