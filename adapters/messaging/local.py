"""Embedded twins of the RabbitMQ adapters, for a single process without a broker.

The work queue holds the same signed messages the broker would, and its consumer opens them
through the same ``DeliveryProcessor``, so signatures and settlements behave alike. Nothing here
survives a restart except the events file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from adapters.common.lifecycle import RunUntilStopped
from adapters.messaging.delivery import DeliveryProcessor, drain
from adapters.messaging.wire.envelope import OutgoingMessage, header_text
from adapters.messaging.wire.events import EVENTS_EXCHANGE, EventMessages
from adapters.messaging.wire.work import WORK_QUEUE, WorkMessages
from application.errors import PublishFailed
from application.ports.messaging import (
    JobEventPublisher,
    Settlement,
    WorkConsumer,
    WorkHandler,
    WorkQueue,
)
from application.ports.signer import MessageSigner
from application.ports.tracer import TraceCarrier
from domain.audit_chain import Checkpoint
from domain.job import Job

logger = logging.getLogger(__name__)

CHECKPOINTS_FILE = "audit-checkpoints.jsonl"
"""Where the embedded default publishes the audit checkpoints' CloudEvents."""

T = TypeVar("T")


def _unix_now() -> int:
    return int(time.time())


class InProcessWorkQueue(WorkQueue):
    """An ``asyncio.Queue`` of signed work messages. ``dead_letters`` keeps what the consumer
    rejected, as the broker's dead-letter queue would."""

    def __init__(
        self,
        signer: MessageSigner,
        *,
        queue_name: str = WORK_QUEUE,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.queue_name = queue_name
        self.messages: asyncio.Queue[OutgoingMessage] = asyncio.Queue()
        self.dead_letters: list[OutgoingMessage] = []
        self._work = WorkMessages(queue_name, signer, clock or _unix_now)
        self._closed = False

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None:
        if self._closed:
            raise PublishFailed("the in-process work queue is closed")
        self.messages.put_nowait(self._work.of(job, trace_context))

    async def check(self) -> None:
        if self._closed:
            raise PublishFailed("the in-process work queue is closed")

    async def close(self) -> None:
        self._closed = True


class InProcessWorkConsumer(WorkConsumer):
    """Consumes an ``InProcessWorkQueue`` with at most ``concurrency`` handlers at once."""

    def __init__(
        self,
        queue: InProcessWorkQueue,
        signer: MessageSigner,
        handler: WorkHandler,
        *,
        concurrency: int = 4,
        clock: Callable[[], int] | None = None,
        retry_delay: float = 1.0,
        error_backoff: float = 1.0,
        max_backoff: float = 30.0,
        stop_timeout: float = 30.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._queue = queue
        self._deliveries = DeliveryProcessor(
            signer=signer,
            handler=handler,
            clock=clock or _unix_now,
            retry_delay=retry_delay,
            error_backoff=error_backoff,
            max_backoff=max_backoff,
        )
        self._slots = asyncio.Semaphore(concurrency)
        self._stop_timeout = stop_timeout
        self._lifecycle = RunUntilStopped()
        self._stopping = self._lifecycle.stopping
        self._inflight: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        with self._lifecycle.running():
            try:
                await self._consume()
            finally:
                self._stopping.set()
                await self._drain()

    async def stop(self) -> None:
        await self._lifecycle.stop()

    async def _consume(self) -> None:
        while True:
            acquired, _ = await self._unless_stopping(self._slots.acquire())
            if not acquired:
                return
            got, message = await self._unless_stopping(self._queue.messages.get())
            if not got or message is None:
                self._slots.release()
                return
            task = asyncio.create_task(self._handle(message))
            self._inflight.add(task)
            task.add_done_callback(self._done)

    async def _unless_stopping(self, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """Await ``awaitable`` unless a stop comes first; whatever it obtained after the stop
        (a slot, a message) is given back."""
        work: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        stop: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait([work, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
                await asyncio.wait({work})
            current = asyncio.current_task()
            interrupted = self._stopping.is_set() or bool(current and current.cancelling())
            obtained = not work.cancelled() and work.exception() is None
            if interrupted and obtained:
                self._give_back(work.result())
        if interrupted or not obtained:
            return False, None
        return True, work.result()

    def _give_back(self, result: Any) -> None:
        if isinstance(result, OutgoingMessage):
            self._queue.messages.put_nowait(result)
        elif result is True:
            self._slots.release()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._slots.release()

    async def _handle(self, message: OutgoingMessage) -> None:
        try:
            settlement = await self._deliveries.process(
                headers=message.headers,
                body=message.body,
                exchange=message.exchange,
                routing_key=message.routing_key,
                stopping=self._stopping,
            )
        except asyncio.CancelledError:
            self._queue.messages.put_nowait(message)
            raise
        if settlement is Settlement.REQUEUE:
            self._queue.messages.put_nowait(message)
        elif settlement is Settlement.DEAD_LETTER:
            self._queue.dead_letters.append(message)

    async def _drain(self) -> None:
        await drain(self._inflight, self._stop_timeout)


class JsonlJobEventPublisher(JobEventPublisher):
    """Appends each event as one JSON line ``{"exchange", "routingKey", "headers", "body"}``
    (``body`` is the exact signed text; header values as JSON strings and numbers, byte arrays
    as their UTF-8 text), flushed and fsynced before ``publish`` returns."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        source: str,
        signer: MessageSigner,
        exchange: str = EVENTS_EXCHANGE,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._path = Path(path)
        self._events = EventMessages(source, exchange, signer, clock or _unix_now)
        self._lock = asyncio.Lock()
        self._closed = False

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None:
        await self._write(self._path, self._events.of(job, trace_context))

    async def publish_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Checkpoints go to ``audit-checkpoints.jsonl`` beside the events file, so the
        events file keeps job events only."""
        checkpoints = self._path.with_name(CHECKPOINTS_FILE)
        await self._write(checkpoints, self._events.of_checkpoint(checkpoint))

    async def _write(self, path: Path, message: OutgoingMessage) -> None:
        if self._closed:
            raise PublishFailed("the events file publisher is closed")
        try:
            body = message.body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PublishFailed("event body is not UTF-8 text") from e
        record = {
            "exchange": message.exchange,
            "routingKey": message.routing_key,
            "headers": {
                name: header_text(value) if isinstance(value, bytes) else value
                for name, value in message.headers.items()
            },
            "body": body,
        }
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:
            try:
                await asyncio.to_thread(self._append, path, line)
            except OSError as e:
                raise PublishFailed("could not write the events file") from e

    @staticmethod
    def _append(path: Path, line: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())

    async def check(self) -> None:
        if self._closed:
            raise PublishFailed("the events file publisher is closed")
        ok = await asyncio.to_thread(self._writable)
        if not ok:
            raise PublishFailed("the events file is not writable")

    def _writable(self) -> bool:
        """The file can be appended to, or created: its nearest existing ancestor is a folder
        this process may write to (a file there blocks it, whatever its permissions)."""
        if self._path.exists():
            return self._path.is_file() and os.access(self._path, os.W_OK)
        parent = self._path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        return parent.is_dir() and os.access(parent, os.W_OK)

    async def close(self) -> None:
        self._closed = True
