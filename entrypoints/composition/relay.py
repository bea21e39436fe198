"""The relay role: the followers of the event log (dispatcher, emitter, projection), the
reaper, the audit checkpoints and the log watch, on the shared infrastructure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from adapters.messaging.local import InProcessWorkQueue
from application.audit import checkpointer
from application.audit.checkpointer import RecordCheckpoints
from application.audit.witness import (
    PublishCheckpoints,
    WitnessCheckpoints,
    record_then_witness,
)
from application.jobs.fresh_index import FreshJobIndex
from application.jobs.repository import EventSourcedJobs
from application.policies import emit_events, publish_work_orders
from application.policies.emit_events import EmitJobEvents
from application.policies.follower import (
    Handler,
    Interest,
    LogFollower,
    Observer,
    PeriodicTask,
    ProjectionFollower,
    SharedLogReads,
    WakeOnGrowth,
)
from application.policies.publish_work_orders import PublishWorkOrders
from application.policies.reap_jobs import ReapJobs
from application.policies.requeue_pending import RequeuePending
from application.ports.clock import Clock
from application.ports.job_event_store import JobEventStore
from application.ports.log_watch import AnyLogWatch, LogWatch
from application.ports.messaging import JobEventPublisher, WorkQueue
from application.ports.metrics import Metrics
from application.ports.tracer import NO_TRACER, Tracer
from entrypoints.composition.bundles import JobTable, Publishers
from entrypoints.composition.infrastructure import Infrastructure, load_audit_keys
from entrypoints.roles import PROJECTION, Relay, Role
from entrypoints.settings import Settings

FOLLOWER_POLL_SECONDS = 0.5
RELAY_POLL_SECONDS = 0.2
"""A relay without the API in its process, and without notifications, is never woken by a new
job, so it looks more often."""
LISTENING_POLL_SECONDS = 5.0
"""Followers woken by the database's notifications poll only as a safety net."""
REAPER_POLL_SECONDS = 5.0
"""With the lease, bounds how long a dead worker's job waits for the reaper's dispatch."""
AUDIT_POLL_SECONDS = 1.0
RECORD_DELAY_SECONDS = 0.1
"""The dispatcher and the emitter record their position at most this long after publishing
(once for everything published meanwhile); a relay that crashes publishes again at most what
it published in that time (at least once: a duplicate work order is dropped by the claim, a
duplicate event has the same ``ce-id``)."""
PROJECTION_SETTLE_SECONDS = 0.05
"""The job index waits this long after a wake before it reads, so it projects bigger batches
less often (it is read by queries that tolerate this, and brought up to date first where
they do not)."""


def relay_role(infra: Infrastructure, publishers: Publishers) -> Relay:
    """The relay on ``infra``: how often its followers poll depends on what wakes them (the
    database's notifications, the API in the same process, or nothing)."""
    settings, events = infra.settings, infra.events
    if events.watch is not None:
        poll_interval = LISTENING_POLL_SECONDS
    elif Role.API in infra.roles:
        poll_interval = FOLLOWER_POLL_SECONDS
    else:
        poll_interval = RELAY_POLL_SECONDS
    checkpoints: Callable[[], Awaitable[int]] | None = None
    if events.audit_log is not None and infra.checkpoints is not None:
        checkpoints = RecordCheckpoints(
            events.audit_log,
            infra.checkpoints,
            load_audit_keys(settings, infra.ring).signer,
            infra.clock,
            every_records=settings.audit.checkpoint_every,
            every_seconds=settings.audit.checkpoint_seconds,
        )
        witness = publish = None
        if infra.witnesses is not None:
            witness = WitnessCheckpoints(infra.checkpoints, infra.witnesses, events.store)
        if settings.audit.events:
            publish = PublishCheckpoints(infra.checkpoints, publishers.events, events.store)
        if witness is not None or publish is not None:
            checkpoints = record_then_witness(checkpoints, witness, publish)
    return build_relay(
        settings,
        events.store,
        infra.tables.jobs,
        publishers.work_queue,
        publishers.events,
        infra.clock,
        poll_interval=poll_interval,
        queue_is_volatile=isinstance(publishers.work_queue, InProcessWorkQueue),
        tracer=infra.tracer,
        metrics=infra.metrics,
        watch=growth_watch_for(events.store, events.watch),
        checkpoints=checkpoints,
    )


def build_relay(
    settings: Settings,
    store: JobEventStore,
    job_index: JobTable,
    queue: WorkQueue,
    publisher: JobEventPublisher,
    clock: Clock,
    *,
    poll_interval: float,
    queue_is_volatile: bool = False,
    metrics: Metrics,
    tracer: Tracer = NO_TRACER,
    watch: LogWatch | None = None,
    checkpoints: Callable[[], Awaitable[int]] | None = None,
) -> Relay:
    """The followers and the reaper on the given ports. ``queue_is_volatile``: the work queue
    loses what it holds when the process stops, so pending jobs are queued again at start.
    ``watch``: the followers also wake when it tells that the log grew."""
    reads = SharedLogReads(store)
    jobs = EventSourcedJobs(store)

    def publishing(
        name: str, handle: Handler, interested: Interest, observe: Observer | None = None
    ) -> LogFollower:
        """A follower that publishes what it handles (recording its position shortly after)."""
        return LogFollower(
            name=name,
            store=store,
            handle=handle,
            interested=interested,
            observe=observe,
            record_delay=RECORD_DELAY_SECONDS,
            poll_interval=poll_interval,
            metrics=metrics,
            reads=reads,
        )

    dispatch = PublishWorkOrders(
        jobs,
        queue,
        clock,
        deadline=timedelta(seconds=settings.engine.dispatch_timeout_seconds),
        tracer=tracer,
        metrics=metrics,
    )
    emit = EmitJobEvents(jobs, publisher, tracer=tracer, metrics=metrics)
    relay = Relay(
        dispatcher=publishing(
            publish_work_orders.FOLLOWER_NAME, dispatch, PublishWorkOrders.interested
        ),
        emitter=publishing(emit_events.FOLLOWER_NAME, emit, EmitJobEvents.interested, emit.observe),
        projection=ProjectionFollower(
            name=PROJECTION,
            store=store,
            index=job_index,
            poll_interval=poll_interval,
            metrics=metrics,
            reads=reads,
            settle=PROJECTION_SETTLE_SECONDS,
        ),
        reaper=PeriodicTask(
            name="reaper",
            poll_interval=REAPER_POLL_SECONDS,
            action=ReapJobs(
                jobs,
                job_index,
                queue,
                clock,
                pending_timeout=timedelta(seconds=settings.engine.pending_timeout_seconds),
                metrics=metrics,
                leases=job_index,
            ),
        ),
        requeue_on_start=(
            RequeuePending(jobs, FreshJobIndex(job_index, store), queue, clock)
            if queue_is_volatile
            else None
        ),
        audit=PeriodicTask(
            name=checkpointer.FOLLOWER_NAME,
            poll_interval=AUDIT_POLL_SECONDS,
            action=checkpoints,
        )
        if checkpoints is not None
        else None,
    )
    if watch is not None:
        relay.waker = WakeOnGrowth(
            name="log-watch",
            watch=watch,
            followers=(relay.dispatcher, relay.emitter, relay.projection),
        )
    return relay


def growth_watch_for(store: JobEventStore, others: LogWatch | None) -> LogWatch:
    """How the followers hear the log grow: this process's appends as the store commits them,
    and ``others`` (the database's notifications) for the appends of other processes."""
    return store.appended if others is None else AnyLogWatch((store.appended, others))
