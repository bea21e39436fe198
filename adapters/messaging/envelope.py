"""The signed AMQP envelope: building work messages (reference §4.8) and opening them again.

Opening is shared by the RabbitMQ consumer and its in-process twin, so both settle a delivery
the same way: the signature is checked first (``max_age=None``: a queued job does not expire),
then the body's ``jobId``; anything that fails either check is dead-lettered, never retried.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from application.errors import InvalidSignature
from application.log_context import log_fields
from application.ports.messaging import Settlement, WorkHandler, WorkOrder
from application.ports.signer import MessageSigner
from application.ports.tracer import TRACE_HEADERS, trace_headers
from domain.error_catalogue import ErrorKind
from domain.errors import FetcherError
from domain.tenant import SINGLE_TENANT, Tenant, is_valid_tenant_id

logger = logging.getLogger(__name__)

TENANT_HEADER = "X-Tenant-ID"
REQUEST_ID_HEADER = "X-Request-Id"
RETRY_COUNT_HEADER = "x-retry-count"
WORK_QUEUE = "fetcher.extract-external-data.queue"
EVENTS_EXCHANGE = "fetcher.job.events"


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


def work_message(
    order: WorkOrder, *, queue: str, signer: MessageSigner, now: int
) -> OutgoingMessage:
    """A job message for the default exchange, routed straight to ``queue``. The order's
    tenant is carried in ``X-Tenant-ID`` and signed; the single tenant's messages carry none,
    so their signed tenant is empty (the reference's single-tenant mode)."""
    return signed_message(
        exchange="",
        routing_key=queue,
        body=order.body,
        headers={"jobId": str(order.job_id), **trace_headers(order.trace_context)},
        tenant=None if order.tenant.is_single else order.tenant.id,
        request_id=order.request_id,
        signer=signer,
        now=now,
    )


class UnreadableMessage(Exception):
    """A correctly signed work message without a usable ``jobId`` in its body, or with a
    tenant header that is no tenant id."""


def header_text(value: object) -> str:
    """A header value as text, whether it came as a byte array or a string."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


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
        body=body,
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


def _safe_error(error: BaseException) -> str:
    if isinstance(error, FetcherError):
        return f"{type(error).__name__}: {error}"
    return type(error).__name__


async def pause(seconds: float, stopping: asyncio.Event) -> None:
    """Sleep, but wake up as soon as the consumer is asked to stop."""
    if seconds <= 0 or stopping.is_set():
        return
    try:
        await asyncio.wait_for(stopping.wait(), timeout=seconds)
    except TimeoutError:
        pass


class DeliveryProcessor:
    """Opens a delivery, runs the handler and says how to settle it.

    Delays (``retry_delay`` for ``REQUEUE``; an exponential backoff from ``error_backoff`` up to
    ``max_backoff`` per job for handler errors) are served before the requeue, so a requeued
    message does not spin; they end early when ``stopping`` is set. Bodies are never logged.
    """

    _MAX_TRACKED = 10_000

    def __init__(
        self,
        *,
        signer: MessageSigner,
        handler: WorkHandler,
        clock: Callable[[], int],
        retry_delay: float = 1.0,
        error_backoff: float = 1.0,
        max_backoff: float = 30.0,
    ) -> None:
        self._signer = signer
        self._handler = handler
        self._clock = clock
        self._retry_delay = retry_delay
        self._error_backoff = error_backoff
        self._max_backoff = max_backoff
        self._failures: OrderedDict[UUID, int] = OrderedDict()

    async def process(
        self,
        *,
        headers: Mapping[str, object],
        body: bytes,
        exchange: str,
        routing_key: str,
        stopping: asyncio.Event,
    ) -> Settlement:
        if stopping.is_set():
            return Settlement.REQUEUE
        try:
            order = open_work_message(
                headers=headers,
                body=body,
                exchange=exchange,
                routing_key=routing_key,
                signer=self._signer,
                now=self._clock(),
            )
        except InvalidSignature as e:
            logger.warning("work message dead-lettered: invalid signature (%s)", e)
            return Settlement.DEAD_LETTER
        except UnreadableMessage as e:
            logger.warning("work message dead-lettered: %s", e)
            return Settlement.DEAD_LETTER

        with log_fields(job_id=str(order.job_id), request_id=order.request_id):
            return await self._run(order, stopping)

    async def _run(self, order: WorkOrder, stopping: asyncio.Event) -> Settlement:
        try:
            settlement = await self._handler(order)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            delay = self._backoff(order.job_id)
            # A dependency that is down (the database, storage) is an outage, not a fault.
            unavailable = isinstance(e, FetcherError) and e.kind is ErrorKind.UNAVAILABLE
            logger.log(
                logging.WARNING if unavailable else logging.ERROR,
                "work handler failed for job %s (%s); requeued after %.1fs",
                order.job_id,
                _safe_error(e),
                delay,
            )
            logger.debug("work handler failure for job %s", order.job_id, exc_info=True)
            await pause(delay, stopping)
            return Settlement.REQUEUE

        self._failures.pop(order.job_id, None)
        if settlement is Settlement.REQUEUE:
            await pause(self._retry_delay, stopping)
        elif settlement is Settlement.DEAD_LETTER:
            logger.warning("work message for job %s dead-lettered by its handler", order.job_id)
        return settlement

    def _backoff(self, job_id: UUID) -> float:
        # Not a retry library's loop: the broker redelivers, so the count is kept per job
        # across deliveries and only the delay before each requeue is computed here.
        failures = self._failures.pop(job_id, 0) + 1
        self._failures[job_id] = failures
        while len(self._failures) > self._MAX_TRACKED:
            self._failures.popitem(last=False)
        return float(min(self._error_backoff * 2 ** min(failures - 1, 16), self._max_backoff))


async def drain(tasks: set[asyncio.Task[Any]], timeout: float) -> None:
    """Lets in-flight work handlers finish for up to ``timeout`` seconds, then cancels the rest
    (their messages go back to the queue)."""
    pending = {task for task in tasks if not task.done()}
    if not pending:
        return
    _, late = await asyncio.wait(pending, timeout=timeout)
    if late:
        logger.warning("%d work handlers did not finish in time; cancelled", len(late))
        for task in late:
            task.cancel()
        await asyncio.wait(late)
