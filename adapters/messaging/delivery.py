"""Settling work deliveries: shared by the RabbitMQ consumer and its in-process twin, so both
settle a delivery the same way. The delivery is opened as ``wire.work`` says (signature first,
then the body's ``jobId``); anything that fails either check is dead-lettered, never retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from adapters.messaging.wire.work import UnreadableMessage, open_work_message
from application.errors import InvalidSignature
from application.log_context import log_fields
from application.ports.messaging import Settlement, WorkHandler, WorkOrder
from application.ports.signer import MessageSigner
from domain.error_catalogue import ErrorKind
from domain.errors import FetcherError

logger = logging.getLogger(__name__)


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
