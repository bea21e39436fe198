"""The process roles: ``serve`` (all in one), ``api``, ``worker`` and ``relay``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

import uvicorn

from adapters.messaging.envelope import Outcome
from adapters.messaging.local import InProcessWorkConsumer, InProcessWorkQueue
from adapters.messaging.rabbitmq_consumer import RabbitWorkConsumer
from application.commands.run_job import RunJob, RunOutcome
from application.fresh_job_index import FreshJobIndex
from application.policies import dispatch_work, emit_events
from application.policies.dispatch_work import DispatchWork
from application.policies.emit_events import EmitJobEvents
from application.policies.follower import LogFollower, PeriodicTask, ProjectionFollower
from application.policies.reap_jobs import ReapJobs
from application.policies.requeue_pending import RequeuePending
from application.ports.messaging import JobEventPublisher, WorkOrder, WorkQueue
from entrypoints.bootstrap import (
    Core,
    open_core,
    open_event_publisher,
    open_storage,
    open_work_queue,
    topology,
)
from entrypoints.http.app import create_app
from entrypoints.http.request_deadlines import DeadlineH11Protocol
from entrypoints.settings import Settings, SettingsError

log = logging.getLogger("fetcher")

_Runnable = LogFollower | ProjectionFollower | PeriodicTask

HTTP_SHUTDOWN_SECONDS = 5

_OUTCOMES = {RunOutcome.DONE: Outcome.DONE, RunOutcome.RETRY: Outcome.RETRY}


def _handler(
    run_job: RunJob, after: Callable[[], None]
) -> Callable[[WorkOrder], Awaitable[Outcome]]:
    async def handle(order: WorkOrder) -> Outcome:
        outcome = await run_job(order.job_id)
        after()
        return _OUTCOMES[outcome]

    return handle


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)


async def _until_stopped(stop: asyncio.Event, *jobs: Coroutine[Any, Any, Any]) -> None:
    """Runs ``jobs`` until ``stop`` is set or one of them ends (which then stops the rest)."""
    tasks = [asyncio.create_task(job) for job in jobs]
    stopper = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopper and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        stop.set()
        _, late = await asyncio.wait(tasks, timeout=35)
        for task in (*late, stopper):
            task.cancel()
        await asyncio.gather(*late, stopper, return_exceptions=True)


async def _consume(consumer: Any, stop: asyncio.Event) -> None:
    """Runs a work consumer until ``stop``, then stops it: in-flight jobs get the consumer's
    own grace period, and nothing new is taken."""
    running = asyncio.create_task(consumer.run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        await consumer.stop()
    await running


def _uvicorn(settings: Settings, app: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=settings.http.host,
        port=settings.http.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=DeadlineH11Protocol.with_timeouts(
            settings.http.header_timeout_seconds, settings.http.body_timeout_seconds
        ),
        # A request still open this long after a stop signal (a client that never finishes
        # its body) is cut, so shutdown is not held by it.
        timeout_graceful_shutdown=HTTP_SHUTDOWN_SECONDS,
    )
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    return server


async def _serve_http(server: uvicorn.Server, stop: asyncio.Event) -> None:
    async def watch() -> None:
        await stop.wait()
        server.should_exit = True

    watcher = asyncio.create_task(watch())
    try:
        await server.serve()
    finally:
        watcher.cancel()
    if not server.started:
        raise SettingsError(f"could not listen on {server.config.host}:{server.config.port}")


def _followers(core: Core, queue: WorkQueue, publisher: JobEventPublisher) -> list[_Runnable]:
    """The log followers and the reaper (run by ``relay``, or by ``serve`` on its own)."""
    return [
        LogFollower(
            name=dispatch_work.FOLLOWER_NAME,
            store=core.store,
            handle=DispatchWork(core.store, queue, core.clock),
        ),
        LogFollower(
            name=emit_events.FOLLOWER_NAME,
            store=core.store,
            handle=EmitJobEvents(core.store, publisher),
        ),
        ProjectionFollower(name="projection", store=core.store, index=core.index),
        PeriodicTask(
            name="reaper",
            poll_interval=30.0,
            action=ReapJobs(
                core.store,
                core.index,
                queue,
                core.clock,
                pending_timeout=timedelta(seconds=core.settings.engine.pending_timeout_seconds),
            ),
        ),
    ]


async def serve(settings: Settings) -> None:
    """Every role in one process; on the embedded default, an in-process work queue."""
    stop = asyncio.Event()
    _stop_on_signals(stop)
    async with (
        open_core(settings) as core,
        open_storage(settings) as storage,
        open_work_queue(core) as queue,
        open_event_publisher(core) as publisher,
    ):
        followers = _followers(core, queue, publisher)
        dispatcher, emitter = followers[0], followers[1]
        handler = _handler(core.run_job(storage), emitter.wake.set)
        consumer: Any
        if isinstance(queue, InProcessWorkQueue):
            requeued = await RequeuePending(
                core.store, FreshJobIndex(core.index, core.store), queue, core.clock
            )()
            if requeued:
                log.info("requeued %d pending jobs after a restart", requeued)
            consumer = InProcessWorkConsumer(
                queue, core.internal_signer, handler, concurrency=settings.broker.workers
            )
        else:
            if settings.broker.url is None:
                raise SettingsError("RABBITMQ_URL is required")
            consumer = await RabbitWorkConsumer.connect(
                settings.broker.url,
                settings.broker.work_queue,
                core.internal_signer,
                handler,
                prefetch=settings.broker.workers,
            )
        services = core.api_services(
            {
                "event_store": core.store.check,
                "broker": queue.check,
                "events": publisher.check,
                "storage": storage.check,
            }
        )
        services.on_job_recorded = dispatcher.wake.set
        server = _uvicorn(settings, create_app(services))
        log.info("fetcher serving on http://%s:%d", settings.http.host, settings.http.port)
        try:
            await _until_stopped(
                stop,
                _serve_http(server, stop),
                *(follower.run(stop) for follower in followers),
                _consume(consumer, stop),
            )
        finally:
            await consumer.stop()


async def api(settings: Settings) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher api` (use `fetcher serve`)")
    async with open_core(settings) as core, open_storage(settings) as storage:
        await topology(settings).apply(settings.broker.url)
        broker_url = settings.broker.url

        async def broker_ready() -> None:
            await topology(settings).apply(broker_url, passive=True, operation_timeout=2.0)

        services = core.api_services(
            {"event_store": core.store.check, "broker": broker_ready, "storage": storage.check}
        )
        server = _uvicorn(settings, create_app(services))
        log.info("fetcher api on http://%s:%d", settings.http.host, settings.http.port)
        await _until_stopped(stop, _serve_http(server, stop))


async def worker(settings: Settings) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher worker`")
    async with open_core(settings) as core, open_storage(settings) as storage:
        await topology(settings).apply(settings.broker.url)
        consumer = await RabbitWorkConsumer.connect(
            settings.broker.url,
            settings.broker.work_queue,
            core.internal_signer,
            _handler(core.run_job(storage), lambda: None),
            prefetch=settings.broker.workers,
        )
        log.info("fetcher worker consuming %s", settings.broker.work_queue)
        try:
            await _until_stopped(stop, _consume(consumer, stop))
        finally:
            await consumer.stop()


async def relay(settings: Settings) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher relay`")
    async with (
        open_core(settings) as core,
        open_work_queue(core) as queue,
        open_event_publisher(core) as publisher,
    ):
        followers = _followers(core, queue, publisher)
        for follower in followers[:3]:
            follower.poll_interval = 0.2
        log.info("fetcher relay following the event log")
        await _until_stopped(stop, *(follower.run(stop) for follower in followers))
