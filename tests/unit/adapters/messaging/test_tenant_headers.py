"""The tenant on the wire: work messages carry and sign ``X-Tenant-ID`` for a tenant (none for
the single tenant), job events name their tenant in ``ce-tenantid``, ``X-Tenant-ID`` and the
signed tenant line (reference §5.2, §5.5)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from datetime import UTC, datetime
from uuid import UUID

import pytest

from adapters.crypto.signing import HmacMessageSigner
from adapters.messaging.delivery import DeliveryProcessor
from adapters.messaging.wire.events import JobNotification, job_event_message
from adapters.messaging.wire.work import UnreadableMessage, open_work_message, work_message
from application.errors import InvalidSignature
from application.ports.messaging import Settlement, WorkOrder
from domain.tenant import SINGLE_TENANT, Tenant

KEY = bytes(range(32))
JOB_ID = UUID("0190b8a0-0000-7000-8000-000000000001")
NOW = 1_780_000_000
QUEUE = "fetcher.extract-external-data.queue"
EXCHANGE = "fetcher.job.events"
BODY = b'{"jobId":"0190b8a0-0000-7000-8000-000000000001","metadata":{},"status":"failed"}'
B = Tenant("tenant-b")


def mac(tenant: str, exchange: str, routing_key: str) -> str:
    """The §5.5 signature, computed here independently of the production signer."""
    payload = f"{NOW}\nv1\n{tenant}\n{JOB_ID}\n{exchange}\n{routing_key}\n".encode() + BODY
    return hmac.new(KEY, payload, hashlib.sha256).hexdigest()


def signer() -> HmacMessageSigner:
    return HmacMessageSigner([KEY])


def test_a_tenants_work_message_carries_and_signs_its_tenant():
    message = work_message(
        WorkOrder(job_id=JOB_ID, request_id="r", tenant=B),
        BODY,
        queue=QUEUE,
        signer=signer(),
        now=NOW,
    )
    assert message.headers["X-Tenant-ID"] == "tenant-b"
    assert message.headers["x-message-signature"] == mac("tenant-b", "", QUEUE)
    order = open_work_message(
        headers=message.headers,
        body=BODY,
        exchange="",
        routing_key=QUEUE,
        signer=signer(),
        now=NOW,
    )
    assert order.tenant == B


def test_the_single_tenants_work_message_carries_no_tenant_and_signs_an_empty_line():
    message = work_message(
        WorkOrder(job_id=JOB_ID, request_id="r", tenant=SINGLE_TENANT),
        BODY,
        queue=QUEUE,
        signer=signer(),
        now=NOW,
    )
    assert "X-Tenant-ID" not in message.headers
    assert list(message.headers) == [
        "jobId",
        "X-Request-Id",
        "x-retry-count",
        "x-message-signature",
        "t",
        "signature-version",
    ]
    assert message.headers["x-message-signature"] == mac("", "", QUEUE)
    order = open_work_message(
        headers=message.headers, body=BODY, exchange="", routing_key=QUEUE, signer=signer(), now=NOW
    )
    assert order.tenant == SINGLE_TENANT


def test_a_changed_tenant_header_breaks_the_signature():
    message = work_message(
        WorkOrder(job_id=JOB_ID, tenant=B), BODY, queue=QUEUE, signer=signer(), now=NOW
    )
    for forged in (
        {**message.headers, "X-Tenant-ID": "tenant-a"},
        {k: v for k, v in message.headers.items() if k != "X-Tenant-ID"},
    ):
        with pytest.raises(InvalidSignature):
            open_work_message(
                headers=forged, body=BODY, exchange="", routing_key=QUEUE, signer=signer(), now=NOW
            )


async def test_a_signed_tenant_header_that_is_no_tenant_id_is_dead_lettered():
    headers: dict[str, object] = {"X-Tenant-ID": "a/b"}
    headers.update(
        signer().sign(tenant="a/b", exchange="", routing_key=QUEUE, body=BODY, timestamp=NOW)
    )
    with pytest.raises(UnreadableMessage):
        open_work_message(
            headers=headers, body=BODY, exchange="", routing_key=QUEUE, signer=signer(), now=NOW
        )

    async def never(_: WorkOrder) -> Settlement:
        raise AssertionError("the handler must not run")

    deliveries = DeliveryProcessor(signer=signer(), handler=never, clock=lambda: NOW)
    settled = await deliveries.process(
        headers=headers, body=BODY, exchange="", routing_key=QUEUE, stopping=asyncio.Event()
    )
    assert settled is Settlement.DEAD_LETTER


def _event(tenant: Tenant) -> dict[str, str | int]:
    notification = JobNotification(
        job_id=JOB_ID,
        status="failed",
        body=BODY,
        time=datetime(2026, 7, 13, 13, 0, tzinfo=UTC),
        request_id="r",
        tenant=tenant,
    )
    return job_event_message(
        notification, source="//s", exchange=EXCHANGE, signer=signer(), now=NOW
    ).headers


def test_a_tenants_event_names_its_tenant_everywhere():
    headers = _event(B)
    assert headers["ce-tenantid"] == b"tenant-b" and headers["X-Tenant-ID"] == "tenant-b"
    assert headers["x-message-signature"] == mac("tenant-b", EXCHANGE, "job.failed")


def test_the_single_tenants_event_is_single_tenant_as_in_the_reference():
    headers = _event(SINGLE_TENANT)
    assert headers["ce-tenantid"] == b"single-tenant" and headers["X-Tenant-ID"] == "single-tenant"
    assert headers["x-message-signature"] == mac("single-tenant", EXCHANGE, "job.failed")
