"""Contract of the work queue and its consumer (``WorkQueue`` and ``WorkConsumer``).

A subclass supplies ``queue`` (working), ``broken_queue`` (cannot publish: its broker queue is
missing, or it is down), ``consumer_for`` (an async factory: a consumer of ``queue`` around a
handler, with delays of a few hundredths of a second) and ``inspector`` (what is waiting and
what was dead-lettered, seen behind the adapter).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol
from uuid import UUID

import pytest

from application.errors import PublishFailed
from application.ports.messaging import (
    Settlement,
    WorkConsumer,
    WorkHandler,
    WorkOrder,
    WorkQueue,
)
from domain.job import Job
from domain.tenant import Tenant
from tests.support.jobs import requested_job

ConsumerFactory = Callable[[WorkHandler], Awaitable[WorkConsumer]]


class WorkQueueInspector(Protocol):
    async def waiting(self) -> int:
        """Orders published and not yet taken by a consumer."""
        ...

    async def dead_lettered(self) -> list[UUID]:
        """The job ids of the orders dead-lettered so far."""
        ...


TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


def order(request_id: str = "req-1", **job: object) -> Job:
    """A requested job, whose work order is published."""
    return requested_job(request_id=request_id, **job)  # type: ignore[arg-type]


def received(job: Job, trace_context: dict[str, str] | None = None) -> WorkOrder:
    """What the consumer of the work order of ``job`` is handed."""
    return WorkOrder(job.id, job.request_id, trace_context or {}, tenant=job.tenant)


@contextlib.asynccontextmanager
async def consuming(consumer: WorkConsumer) -> AsyncIterator[None]:
    running = asyncio.create_task(consumer.run())
    try:
        yield
    finally:
        await consumer.stop()
        await asyncio.wait_for(running, timeout=10)


async def eventually(probe: Callable[[], Awaitable[object]], expected: object) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while (seen := await probe()) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"expected {expected!r}, still {seen!r}")
        await asyncio.sleep(0.02)


class WorkQueueContract:
    async def test_published_orders_reach_the_consumer_unchanged(
        self, queue: WorkQueue, consumer_for: ConsumerFactory, inspector: WorkQueueInspector
    ) -> None:
        orders = [order(f"req-{n}") for n in range(3)]
        seen: list[WorkOrder] = []

        async def handler(work: WorkOrder) -> Settlement:
            seen.append(work)
            return Settlement.ACK

        for each in orders:
            await queue.publish(each)
        async with consuming(await consumer_for(handler)):
            await eventually(lambda: _count(seen), 3)
            await eventually(inspector.waiting, 0)

        assert sorted(seen, key=lambda w: w.request_id) == [received(o) for o in orders]
        assert await inspector.dead_lettered() == []

    async def test_an_order_carries_its_tenant_and_the_trace_it_joins(
        self, queue: WorkQueue, consumer_for: ConsumerFactory
    ) -> None:
        traced = order("req-traced", trace_context=TRACE)
        tenants = order("req-tenant", tenant=Tenant("tenant-b"))
        seen: list[WorkOrder] = []

        async def handler(work: WorkOrder) -> Settlement:
            seen.append(work)
            return Settlement.ACK

        await queue.publish(traced)
        await queue.publish(tenants, TRACE)
        await queue.publish(traced, {})
        async with consuming(await consumer_for(handler)):
            await eventually(lambda: _count(seen), 3)

        assert sorted(seen, key=lambda w: (w.request_id, len(w.trace_context))) == [
            received(tenants, TRACE),
            received(traced),
            received(traced, TRACE),
        ]

    async def test_check_passes_on_a_working_queue(self, queue: WorkQueue) -> None:
        await queue.check()

    async def test_a_queue_that_cannot_publish_raises_publish_failed(
        self, broken_queue: WorkQueue
    ) -> None:
        with pytest.raises(PublishFailed):
            await broken_queue.publish(order())
        with pytest.raises(PublishFailed):
            await broken_queue.check()

    async def test_a_closed_queue_refuses_publishes(self, queue: WorkQueue) -> None:
        await queue.close()
        with pytest.raises(PublishFailed):
            await queue.publish(order())

    async def test_a_requeued_order_is_delivered_again(
        self, queue: WorkQueue, consumer_for: ConsumerFactory, inspector: WorkQueueInspector
    ) -> None:
        sent = order()
        seen: list[WorkOrder] = []

        async def handler(work: WorkOrder) -> Settlement:
            seen.append(work)
            return Settlement.REQUEUE if len(seen) == 1 else Settlement.ACK

        await queue.publish(sent)
        async with consuming(await consumer_for(handler)):
            await eventually(lambda: _count(seen), 2)

        assert seen == [received(sent)] * 2
        assert await inspector.dead_lettered() == []

    async def test_an_order_whose_handler_fails_is_delivered_again(
        self, queue: WorkQueue, consumer_for: ConsumerFactory
    ) -> None:
        sent = order()
        seen: list[WorkOrder] = []

        async def handler(work: WorkOrder) -> Settlement:
            seen.append(work)
            if len(seen) == 1:
                raise RuntimeError("transient")
            return Settlement.ACK

        await queue.publish(sent)
        async with consuming(await consumer_for(handler)):
            await eventually(lambda: _count(seen), 2)

        assert seen == [received(sent)] * 2

    async def test_a_dead_lettered_order_is_not_delivered_again(
        self, queue: WorkQueue, consumer_for: ConsumerFactory, inspector: WorkQueueInspector
    ) -> None:
        sent = order()
        seen: list[WorkOrder] = []

        async def handler(work: WorkOrder) -> Settlement:
            seen.append(work)
            return Settlement.DEAD_LETTER

        await queue.publish(sent)
        async with consuming(await consumer_for(handler)):
            await eventually(inspector.dead_lettered, [sent.id])
            await asyncio.sleep(0.2)

        assert seen == [received(sent)]
        assert await inspector.waiting() == 0

    async def test_stop_lets_the_order_in_hand_finish_and_settle(
        self, queue: WorkQueue, consumer_for: ConsumerFactory, inspector: WorkQueueInspector
    ) -> None:
        started, finished = asyncio.Event(), asyncio.Event()

        async def handler(work: WorkOrder) -> Settlement:
            started.set()
            await asyncio.sleep(0.2)
            finished.set()
            return Settlement.ACK

        await queue.publish(order())
        async with consuming(await consumer_for(handler)):
            await asyncio.wait_for(started.wait(), timeout=10)

        assert finished.is_set()
        again: list[WorkOrder] = []

        async def later(work: WorkOrder) -> Settlement:
            again.append(work)
            return Settlement.ACK

        async with consuming(await consumer_for(later)):
            await asyncio.sleep(0.3)
        assert again == []
        assert await inspector.waiting() == 0
        assert await inspector.dead_lettered() == []

    async def test_a_consumer_stopped_before_it_ran_stops_at_once(
        self, consumer_for: ConsumerFactory
    ) -> None:
        async def handler(work: WorkOrder) -> Settlement:
            raise AssertionError("nothing was published")

        consumer = await consumer_for(handler)
        await asyncio.wait_for(consumer.stop(), timeout=5)


async def _count(items: list[WorkOrder]) -> int:
    return len(items)
