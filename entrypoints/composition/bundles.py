"""The typed bundles the composition package opens and hands around: what an adapter is, as
several ports at once, said by its type instead of probed for at run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from application.ports.audit import AuditLog
from application.ports.connection_repository import ConnectionRepository
from application.ports.job_event_store import JobEventStore
from application.ports.job_index import JobIndex
from application.ports.job_leases import JobLeases
from application.ports.job_progress import JobProgressStore
from application.ports.log_watch import LogWatch
from application.ports.messaging import JobEventPublisher, WorkQueue


class JobTable(JobIndex, JobLeases, JobProgressStore, Protocol):
    """The job index, which keeps the leases and the progress of running jobs beside its rows
    (the SQL one and its twin)."""


@dataclass(frozen=True, slots=True)
class EventLog:
    """The event store as opened: the store, the same store as an ``AuditLog`` where it is
    one, and how the followers hear it grow in other processes (PostgreSQL only)."""

    store: JobEventStore
    audit_log: AuditLog | None = None
    watch: LogWatch | None = None


@dataclass(frozen=True, slots=True)
class ServiceTables:
    """The SQL adapters of the service's database, on one engine: ``engine``, which the other
    tables of that database share (None when both adapters were given)."""

    connections: ConnectionRepository
    jobs: JobTable
    engine: AsyncEngine | None = None


@dataclass(frozen=True, slots=True)
class Publishers:
    """What the relay publishes to: the work queue (orders for the workers) and the events
    publisher (``job.completed`` / ``job.failed``)."""

    work_queue: WorkQueue
    events: JobEventPublisher
