"""In-memory publishers that record what was published, and a consumer of the recorded work
orders, for tests and local wiring. What they record is built as the real publishers build it
(``adapters.messaging.wire``), without the signed envelope.

``fail_next(n)`` makes the next ``n`` publishes raise ``PublishFailed`` (nothing is recorded
for them), to exercise retry paths; ``unavailable`` makes ``check`` fail.
"""

from __future__ import annotations

import asyncio

from adapters.common.lifecycle import RunUntilStopped
from adapters.messaging.wire.events import JobNotification, event_id, job_notification
from adapters.messaging.wire.work import work_order
from application.errors import PublishFailed
from application.ports.messaging import (
    JobEventPublisher,
    Settlement,
    WorkConsumer,
    WorkHandler,
    WorkOrder,
    WorkQueue,
)
from application.ports.tracer import TraceCarrier
from domain.audit_chain import Checkpoint
from domain.job import Job


class _FailureSwitch:
    def __init__(self) -> None:
        self.unavailable = False
        self.closed = False
        self.attempts = 0
        self._fail_next = 0

    def fail_next(self, count: int = 1) -> None:
        self._fail_next = count

    def _before_publish(self) -> None:
        self.attempts += 1
        if self.closed:
            raise PublishFailed("publisher is closed")
        if self._fail_next > 0:
            self._fail_next -= 1
            raise PublishFailed("simulated publish failure")

    async def check(self) -> None:
        if self.unavailable or self.closed:
            raise PublishFailed("simulated broker outage")

    async def close(self) -> None:
        self.closed = True


class RecordingWorkQueue(_FailureSwitch, WorkQueue):
    """Records every order in ``published``, as its consumer would read it; ``waiting`` holds
    those no consumer has taken yet, ``dead_letters`` those a consumer rejected."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[WorkOrder] = []
        self.waiting: asyncio.Queue[WorkOrder] = asyncio.Queue()
        self.dead_letters: list[WorkOrder] = []

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None:
        self._before_publish()
        order = work_order(job, trace_context)
        self.published.append(order)
        self.waiting.put_nowait(order)


class RecordingWorkConsumer(WorkConsumer):
    """Hands the orders waiting on a ``RecordingWorkQueue`` to ``handler``, one at a time, in
    order. ``REQUEUE`` (or a handler error) puts the order back after ``retry_delay`` seconds;
    ``DEAD_LETTER`` moves it to the queue's ``dead_letters``. There is no signature to check:
    the orders never leave the process."""

    def __init__(
        self, queue: RecordingWorkQueue, handler: WorkHandler, *, retry_delay: float = 0.0
    ) -> None:
        self._queue = queue
        self._handler = handler
        self._retry_delay = retry_delay
        self._lifecycle = RunUntilStopped()
        self._stopping = self._lifecycle.stopping

    async def run(self) -> None:
        with self._lifecycle.running():
            while (order := await self._next()) is not None:
                await self._handle(order)

    async def stop(self) -> None:
        await self._lifecycle.stop()

    async def _next(self) -> WorkOrder | None:
        """The next waiting order, or None once stopping (an order taken meanwhile goes back)."""
        if self._stopping.is_set():
            return None
        taking = asyncio.ensure_future(self._queue.waiting.get())
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({taking, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._give_back(taking)
            raise
        finally:
            stopping.cancel()
        if not taking.done() or self._stopping.is_set():
            self._give_back(taking)
            return None
        return taking.result()

    def _give_back(self, taking: asyncio.Future[WorkOrder]) -> None:
        if taking.done() and not taking.cancelled():
            self._queue.waiting.put_nowait(taking.result())
        else:
            taking.cancel()

    async def _handle(self, order: WorkOrder) -> None:
        try:
            settlement = await self._handler(order)
        except asyncio.CancelledError:
            self._queue.waiting.put_nowait(order)
            raise
        except Exception:
            settlement = Settlement.REQUEUE
        if settlement is Settlement.REQUEUE:
            await asyncio.sleep(self._retry_delay)
            self._queue.waiting.put_nowait(order)
        elif settlement is Settlement.DEAD_LETTER:
            self._queue.dead_letters.append(order)


class RecordingJobEventPublisher(_FailureSwitch, JobEventPublisher):
    """Records every event in ``published`` (its body as it would be sent), every checkpoint
    in ``checkpoints``."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[JobNotification] = []
        self.checkpoints: list[Checkpoint] = []

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None:
        self._before_publish()
        self.published.append(job_notification(job, trace_context))

    async def publish_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._before_publish()
        self.checkpoints.append(checkpoint)

    @property
    def event_ids(self) -> list[str]:
        """The CloudEvents ids the real publisher would have sent, in order."""
        return [event_id(n.status, n.job_id) for n in self.published]
