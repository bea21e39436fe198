"""The process roles: ``serve`` (all in one), ``api``, ``worker`` and ``relay``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

import uvicorn

from application.ports.messaging import WorkConsumer
from entrypoints.bootstrap import bootstrap
from entrypoints.http.app import create_app
from entrypoints.http.request_deadlines import DeadlineH11Protocol
from entrypoints.roles import Role
from entrypoints.security import open_http_security
from entrypoints.settings import Settings, SettingsError

log = logging.getLogger("fetcher")

HTTP_SHUTDOWN_SECONDS = 5


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
            error = None if task is stopper else task.exception()
            if error is not None:
                raise error
    finally:
        stop.set()
        _, late = await asyncio.wait(tasks, timeout=35)
        for task in (*late, stopper):
            task.cancel()
        await asyncio.gather(*late, stopper, return_exceptions=True)


async def _consume(consumer: WorkConsumer, stop: asyncio.Event) -> None:
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
    return uvicorn.Server(config)


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


async def serve(settings: Settings) -> None:
    """Every role in one process; on the embedded default, an in-process work queue."""
    stop = asyncio.Event()
    _stop_on_signals(stop)
    async with open_http_security(settings) as security, bootstrap(settings) as fetcher:
        relay, consumer = fetcher.relay, fetcher.worker.consumer
        if relay.requeue_on_start is not None:
            requeued = await relay.requeue_on_start()
            if requeued:
                log.info("requeued %d pending jobs after a restart", requeued)
        server = _uvicorn(settings, create_app(fetcher.api, security))
        log.info("fetcher serving on http://%s:%d", settings.http.host, settings.http.port)
        await _until_stopped(
            stop,
            _serve_http(server, stop),
            *(loop.run(stop) for loop in relay.loops),
            _consume(consumer, stop),
        )


async def api(settings: Settings) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher api` (use `fetcher serve`)")
    async with (
        open_http_security(settings) as security,
        bootstrap(settings, roles={Role.API}) as fetcher,
    ):
        server = _uvicorn(settings, create_app(fetcher.api, security))
        log.info("fetcher api on http://%s:%d", settings.http.host, settings.http.port)
        await _until_stopped(stop, _serve_http(server, stop))


async def worker(settings: Settings) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher worker`")
    async with bootstrap(settings, roles={Role.WORKER}) as fetcher:
        log.info("fetcher worker consuming %s", settings.broker.work_queue)
        await _until_stopped(stop, _consume(fetcher.worker.consumer, stop))


async def relay(settings: Settings) -> None:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher relay`")
    async with bootstrap(settings, roles={Role.RELAY}) as fetcher:
        log.info("fetcher relay following the event log")
        await _until_stopped(stop, *(loop.run(stop) for loop in fetcher.relay.loops))
