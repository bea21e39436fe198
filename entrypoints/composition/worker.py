"""The worker role: ``RunJob`` on the shared infrastructure, its handler and its consumer."""

from __future__ import annotations

import contextlib
import os
import socket
from datetime import timedelta

from adapters.crypto.sealing import AesGcmResultSealer
from adapters.memory.schema_cache import InMemorySchemaCache
from adapters.messaging.local import InProcessWorkConsumer, InProcessWorkQueue
from application.connections.cached import CachingConnectionRepository
from application.connections.cached_discovery import SchemaCachingReader
from application.connections.directory import ConnectionDirectory
from application.jobs.commands.run_job import RunJob, RunLimits
from application.jobs.repository import EventSourcedJobs
from application.jobs.running import RunningJobs
from application.ports.messaging import Settlement, WorkConsumer, WorkHandler, WorkOrder
from entrypoints.composition.infrastructure import Infrastructure, open_rabbit_consumer
from entrypoints.composition.overrides import Overrides
from entrypoints.roles import Relay, Worker
from entrypoints.settings import Settings, SettingsError


def worker_lookups(infra: Infrastructure) -> CachingConnectionRepository | None:
    """A worker's name lookups are remembered for a moment (a second by default): a job runs
    against a connection as it was at most that long ago; writes through this process's API
    forget them at once. ``None`` when that is turned off."""
    seconds = infra.settings.connections.worker_lookup_cache_seconds
    if seconds <= 0:
        return None
    return CachingConnectionRepository(infra.tables.connections, seconds, infra.clock)


async def open_worker(
    stack: contextlib.AsyncExitStack,
    infra: Infrastructure,
    overrides: Overrides,
    lookups: CachingConnectionRepository | None,
    relay: Relay | None,
) -> Worker:
    """The worker on ``infra``; its consumer is opened on ``stack`` (the in-process one when
    the relay of this process publishes to an in-process queue). In one process, a job that
    ran wakes the relay's followers at once."""
    settings = infra.settings
    storage = infra.storage
    if storage is None:
        raise SettingsError("the worker needs result storage")
    options = settings.connections
    directory = infra.directory
    if lookups is not None:
        directory = ConnectionDirectory(
            lookups, directory.internal, visible_to=directory.visible_to
        )
    reader = infra.reader
    if options.worker_schema_ttl_seconds > 0:
        reader = SchemaCachingReader(reader, InMemorySchemaCache(options.worker_schema_ttl_seconds))
    run_job = RunJob(
        jobs=EventSourcedJobs(infra.events.store),
        directory=directory,
        endpoints=infra.endpoints,
        reader=reader,
        sealer=AesGcmResultSealer.from_ring(infra.ring),
        storage=storage,
        clock=infra.clock,
        worker_id=f"{socket.gethostname()}:{os.getpid()}"
        if overrides.worker_id is None
        else overrides.worker_id,
        limits=run_limits_from(settings) if overrides.run_limits is None else overrides.run_limits,
        tracer=infra.tracer,
        progress=infra.progress,
        metrics=infra.metrics,
        leases=infra.tables.jobs,
        crm_keys=options.crm_keys,
    )
    runs = RunningJobs(work_handler(run_job))
    stack.push_async_callback(runs.stop)  # after the consumer's own drain
    handler: WorkHandler = runs
    consumer: WorkConsumer
    work_queue = infra.publishers.work_queue if infra.publishers is not None else None
    if overrides.work_consumer is not None:
        consumer = overrides.work_consumer(handler)
        stack.push_async_callback(consumer.stop)
    elif isinstance(work_queue, InProcessWorkQueue):
        consumer = InProcessWorkConsumer(
            work_queue, infra.internal_signer, handler, concurrency=settings.broker.workers
        )
        stack.push_async_callback(consumer.stop)
    else:
        consumer = await stack.enter_async_context(
            open_rabbit_consumer(settings, infra.internal_signer, handler)
        )
    return Worker(run_job=run_job, consumer=consumer, runs=runs)


def work_handler(run_job: RunJob) -> WorkHandler:
    """The worker's handler: runs the ordered job (as the order's tenant). A job that ran
    wakes this process's followers through the store, which tells its commits."""

    async def handle(order: WorkOrder) -> Settlement:
        return await run_job(
            order.job_id,
            tenant=order.tenant,
            request_id=order.request_id,
            trace_context=order.trace_context,
        )

    return handle


def run_limits_from(settings: Settings) -> RunLimits:
    engine = settings.engine
    return RunLimits(
        max_result_bytes=engine.max_result_bytes,
        timeout=engine.timeout_seconds,
        parallelism=engine.parallelism,
        lease=timedelta(seconds=engine.lease_seconds),
        outage_window=float(engine.outage_seconds),
    )
