"""The process roles: ``serve`` (all in one), ``api``, ``worker`` and ``relay``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Iterator
from typing import Any

import uvicorn

from adapters.metrics.prometheus import PrometheusMetrics
from application.ports.messaging import WorkConsumer
from application.readiness import Readiness
from entrypoints.composition import Overrides, bootstrap
from entrypoints.composition.readiness import (
    DependencyWaiter,
    cause_of,
    needed_by,
    process_metrics,
    starting_probes,
)
from entrypoints.composition.security import check_http_security
from entrypoints.heap import freeze_startup_heap
from entrypoints.http.app import create_app
from entrypoints.http.ops import create_health_app, create_starting_app
from entrypoints.http.request_deadlines import DeadlineHttpToolsProtocol
from entrypoints.listening import listen
from entrypoints.roles import ALL_ROLES, Fetcher, Probes, Role
from entrypoints.settings import Settings, SettingsError

log = logging.getLogger("fetcher")

HTTP_SHUTDOWN_SECONDS = 5
STOP_GRACE_SECONDS = 35
"""How long the roles have to finish once stopped (the consumers' own grace is 30 s)."""


class Shutdown:
    """SIGTERM or SIGINT starts the drain (reference §7.5): readiness answers ``draining`` at
    once, and after ``drain_seconds`` ``stop`` is set, which closes the listeners and ends the
    loops. A second signal ends the drain early. Each phase is logged."""

    def __init__(self, drain_seconds: float) -> None:
        self.drain_seconds = drain_seconds
        self.requested = asyncio.Event()
        """Set by the first signal (or when the process must stop at once)."""
        self.stop = asyncio.Event()
        """Set when the drain is over."""

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.requested.is_set():
            log.info("shutdown: %s again, ending the drain now", sig.name)
            self.stop.set()
            return
        log.info(
            "shutdown: %s received, readiness reports draining for %ss",
            sig.name,
            f"{self.drain_seconds:g}",
        )
        self.requested.set()

    def now(self) -> None:
        """Stops without draining (a part of the process ended on its own)."""
        self.requested.set()
        self.stop.set()

    async def drain(self, readiness: Readiness) -> None:
        await self.requested.wait()
        readiness.start_draining()
        if not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.drain_seconds)
            log.info("shutdown: drain over, closing the listener and finishing in-flight work")
        self.stop.set()


async def _supervise(
    shutdown: Shutdown, readiness: Readiness, *jobs: Coroutine[Any, Any, Any]
) -> None:
    """Runs ``jobs`` (listeners, consumers, loops) with the drain until they have all ended
    after a shutdown. A job that fails, or ends before a shutdown was
    asked for, stops the others at once; its error is raised once they have ended."""
    helpers = [asyncio.create_task(shutdown.drain(readiness))]
    tasks = [asyncio.create_task(job) for job in jobs]
    stopper = asyncio.create_task(shutdown.stop.wait())
    failure: BaseException | None = None
    try:
        pending = set(tasks)
        while pending and not shutdown.stop.is_set():
            done, pending = await asyncio.wait(
                {*pending, stopper}, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(stopper)
            for task in done - {stopper}:
                error = None if task.cancelled() else task.exception()
                if error is not None and failure is None:
                    failure = error
                if error is None and not shutdown.requested.is_set():
                    log.warning("shutdown: a part of the process ended on its own, stopping")
                if error is not None or not shutdown.requested.is_set():
                    shutdown.now()
        if pending:
            _, late = await asyncio.wait(pending, timeout=STOP_GRACE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            for task in pending - late:
                error = None if task.cancelled() else task.exception()
                if error is not None and failure is None:
                    failure = error
    finally:
        shutdown.now()
        for task in (*helpers, stopper, *tasks):
            task.cancel()
        await asyncio.gather(*helpers, stopper, *tasks, return_exceptions=True)
    if failure is not None:
        raise failure
    log.info("shutdown: complete")


async def _consume(consumer: WorkConsumer, stop: asyncio.Event) -> None:
    """Runs a work consumer until ``stop``, then stops it: nothing new is taken, in-flight
    jobs get the consumer's own grace period (the rest go back to the queue)."""
    running = asyncio.create_task(consumer.run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if stop.is_set():
            log.info("shutdown: the worker takes no new jobs and finishes those it runs")
        await consumer.stop()
    await running
    if stop.is_set():
        log.info("shutdown: the worker finished its jobs")


class _Server(uvicorn.Server):
    """A uvicorn server that leaves SIGTERM and SIGINT to the runner's ``Shutdown`` (uvicorn
    would otherwise stop listening at the first signal, before any drain)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _uvicorn(settings: Settings, app: Any, port: int | None = None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=settings.http.host,
        port=settings.http.port if port is None else port,
        log_level="warning",
        log_config=None,  # uvicorn's lines go through the service's own log handler
        access_log=False,
        lifespan="on",
        http=DeadlineHttpToolsProtocol.with_timeouts(
            settings.http.header_timeout_seconds, settings.http.body_timeout_seconds
        ),
        # A request still open this long after a stop signal (a client that never finishes
        # its body) is cut, so shutdown is not held by it.
        timeout_graceful_shutdown=HTTP_SHUTDOWN_SECONDS,
    )
    return _Server(config)


def _listen_http(settings: Settings) -> contextlib.closing[socket.socket]:
    """The API's socket, bound before anything else opens: an address in use is one line."""
    return contextlib.closing(
        listen(settings.http.host, settings.http.port, setting="SERVER_ADDRESS")
    )


async def _serve_http(server: uvicorn.Server, stop: asyncio.Event, sock: socket.socket) -> None:
    async def watch() -> None:
        await stop.wait()
        server.should_exit = True

    watcher = asyncio.create_task(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
    if not server.started:
        raise SettingsError(f"could not listen on {server.config.host}:{server.config.port}")


def _listen_health(settings: Settings) -> contextlib.closing[socket.socket]:
    """The health port's socket (worker and relay), bound before anything else opens."""
    return contextlib.closing(
        listen(settings.http.host, settings.probes.health_port, setting="HEALTH_PORT")
    )


def _health_server(settings: Settings, probes: Probes) -> uvicorn.Server:
    server = _uvicorn(
        settings, create_health_app(probes, probe_at_start=False), settings.probes.health_port
    )
    log.info(
        "health, readiness and metrics on http://%s:%d", settings.http.host, server.config.port
    )
    return server


async def _bootstrapped(
    stack: contextlib.AsyncExitStack,
    settings: Settings,
    roles: Collection[Role],
    metrics: PrometheusMetrics,
) -> Fetcher:
    """``roles`` started on the process's metrics, closed with ``stack``."""
    return await stack.enter_async_context(
        bootstrap(settings, roles=roles, overrides=Overrides(metrics=metrics))
    )


async def _start(
    stack: contextlib.AsyncExitStack,
    settings: Settings,
    roles: Collection[Role],
    shutdown: Shutdown,
    waiter: DependencyWaiter,
    metrics: PrometheusMetrics,
) -> Fetcher | None:
    """Bootstraps ``roles`` once every dependency answers, waiting with backoff while one is
    down; ``None`` when a shutdown came first. A start that fails because a dependency went
    down meanwhile waits again; one that fails with everything reachable (a setting, a
    broker entity declared otherwise) is raised."""
    while await waiter.wait(shutdown.requested):
        try:
            return await _bootstrapped(stack, settings, roles, metrics)
        except SettingsError:
            raise
        except Exception as error:
            if await waiter.reachable():
                raise
            log.warning(
                "start interrupted by a dependency going down (%s), waiting for it",
                cause_of(error),
            )
    return None


@contextlib.asynccontextmanager
async def _answering_while_starting(
    settings: Settings, sock: socket.socket, probes: Probes
) -> AsyncIterator[None]:
    """Serves the probes (and 503 FET-0003 for anything else) on the API's socket until the
    block ends; the socket stays open for the real app (connections wait in its backlog)."""
    server = _uvicorn(settings, create_starting_app(probes))
    serving = asyncio.create_task(server.serve(sockets=[sock.dup()]))
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.gather(serving, return_exceptions=True)


async def _start_http(
    stack: contextlib.AsyncExitStack,
    settings: Settings,
    roles: Collection[Role],
    shutdown: Shutdown,
    sock: socket.socket,
) -> Fetcher | None:
    check_http_security(settings)
    waiter = DependencyWaiter(needed_by(settings, roles))
    metrics = process_metrics(roles)
    if await waiter.reachable():
        # Everything answers: start at once (a failure is said, then handled below while
        # answering the probes).
        try:
            return await _bootstrapped(stack, settings, roles, metrics)
        except SettingsError:
            raise
        except Exception as error:
            log.warning("start failed (%s), answering the probes and trying again", cause_of(error))
    async with _answering_while_starting(
        settings, sock, starting_probes(settings, waiter, metrics)
    ):
        return await _start(stack, settings, roles, shutdown, waiter, metrics)


async def _all(*jobs: Coroutine[Any, Any, Any]) -> None:
    """Runs ``jobs`` together; the first that fails cancels the others, and its error is
    raised."""
    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(job)
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None


async def serve(settings: Settings) -> None:
    """Every role in one process; on the embedded default, an in-process work queue."""
    shutdown = Shutdown(settings.probes.drain_seconds)
    shutdown.install()
    with _listen_http(settings) as sock:
        await _serve_all(settings, shutdown, sock)


async def _serve_all(settings: Settings, shutdown: Shutdown, sock: socket.socket) -> None:
    async with contextlib.AsyncExitStack() as stack:
        fetcher = await _start_http(stack, settings, ALL_ROLES, shutdown, sock)
        if fetcher is None:
            return
        relay, consumer = fetcher.relay, fetcher.worker.consumer
        if relay.requeue_on_start is not None:
            requeued = await relay.requeue_on_start()
            if requeued:
                log.info("requeued %d pending jobs after a restart", requeued)
        server = _uvicorn(settings, create_app(fetcher.api))
        freeze_startup_heap()
        log.info("fetcher serving on http://%s:%d", settings.http.host, settings.http.port)
        await _supervise(
            shutdown,
            fetcher.probes.readiness,
            _serve_http(server, shutdown.stop, sock),
            *(loop.run(shutdown.stop) for loop in relay.loops),
            _consume(consumer, shutdown.requested),
        )


async def api(settings: Settings) -> None:
    shutdown = Shutdown(settings.probes.drain_seconds)
    shutdown.install()
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher api` (use `fetcher serve`)")
    async with contextlib.AsyncExitStack() as stack:
        sock = stack.enter_context(_listen_http(settings))
        fetcher = await _start_http(stack, settings, {Role.API}, shutdown, sock)
        if fetcher is None:
            return
        server = _uvicorn(settings, create_app(fetcher.api))
        freeze_startup_heap()
        log.info("fetcher api on http://%s:%d", settings.http.host, settings.http.port)
        await _supervise(
            shutdown, fetcher.probes.readiness, _serve_http(server, shutdown.stop, sock)
        )


async def _background_role(
    settings: Settings,
    roles: Collection[Role],
    run: Callable[[Fetcher, Shutdown], Coroutine[Any, Any, None]],
) -> None:
    """A role without the API (worker, relay): its health port answers at once, readiness
    reporting what is down while the role waits for its dependencies; once they answer, the
    role starts, readiness checks what it opened and liveness follows the self-probe."""
    shutdown = Shutdown(settings.probes.drain_seconds)
    shutdown.install()
    waiter = DependencyWaiter(needed_by(settings, roles))
    metrics = process_metrics(roles)
    probes = starting_probes(settings, waiter, metrics)
    with _listen_health(settings) as sock:
        health = _health_server(settings, probes)

        async def work() -> None:
            async with contextlib.AsyncExitStack() as stack:
                fetcher = await _start(stack, settings, roles, shutdown, waiter, metrics)
                if fetcher is None:
                    return
                probes.readiness.use(fetcher.probes.readiness.dependencies)
                freeze_startup_heap()
                await _all(probes.readiness.probe_until_live(shutdown.stop), run(fetcher, shutdown))

        await _supervise(
            shutdown, probes.readiness, _serve_http(health, shutdown.stop, sock), work()
        )


async def worker(settings: Settings) -> None:
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher worker`")

    async def run(fetcher: Fetcher, shutdown: Shutdown) -> None:
        log.info("fetcher worker consuming %s", settings.broker.work_queue)
        await _consume(fetcher.worker.consumer, shutdown.requested)

    await _background_role(settings, {Role.WORKER}, run)


async def relay(settings: Settings) -> None:
    if not settings.broker.url:
        raise SettingsError("RABBITMQ_URL is required for `fetcher relay`")

    async def run(fetcher: Fetcher, shutdown: Shutdown) -> None:
        log.info("fetcher relay following the event log")
        await _all(*(loop.run(shutdown.stop) for loop in fetcher.relay.loops))

    await _background_role(settings, {Role.RELAY}, run)
