"""The job projection in SQL (PostgreSQL or SQLite), its position kept in the same transaction.
Each job row records its tenant; a table created before tenants existed is upgraded at start
(its jobs become the single tenant's)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Uuid,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from adapters.sql.job_leases import SqlaJobLeases, job_leases, lease_metadata
from adapters.sql.tables import UtcDateTime, create_tables, upgrade_table
from application.jobs.summaries import summarise
from application.ports.job_event_store import LoggedEvent
from application.ports.job_index import JobIndex, JobSearch, JobSummary
from application.ports.job_progress import JobProgress, JobProgressStore
from domain.errors import Unavailable
from domain.tenant import Tenant

PROJECTION = "job_index"

_metadata = MetaData()

jobs = Table(
    "fetcher_job_index",
    _metadata,
    Column("job_id", Uuid, primary_key=True),
    Column("tenant", String(64), nullable=False, server_default=""),
    Column("status", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("lease_until", UtcDateTime, nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("source", String(200), nullable=False, server_default=""),
    Index("ix_fetcher_job_index_status", "status", "created_at"),
    Index("ix_fetcher_job_index_tenant_created", "tenant", "created_at"),
)

job_datasources = Table(
    "fetcher_job_datasources",
    _metadata,
    Column("job_id", Uuid, primary_key=True),
    Column("config_name", String(200), primary_key=True),
    Index("ix_fetcher_job_datasources_name", "config_name"),
)

job_progress = Table(
    "fetcher_job_progress",
    _metadata,
    Column("job_id", Uuid, primary_key=True),
    Column("attempt", Integer, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

positions = Table(
    "fetcher_projection_positions",
    _metadata,
    Column("name", String(64), primary_key=True),
    Column("position", BigInteger, nullable=False),
)

ACTIVE = ("pending", "processing")
ENDED = ("completed", "failed")


class SqlaJobIndex(SqlaJobLeases, JobIndex, JobProgressStore):
    """The job projection, and the progress and leases of running jobs beside it (dropped
    once a job ends, in the projection's transaction)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create_schema(self) -> None:
        await create_tables(self._engine, _metadata, upgrade=_upgrade)
        await create_tables(self._engine, lease_metadata)

    async def project(self, logged: Sequence[LoggedEvent], *, after: int | None = None) -> int:
        """One transaction per batch. With ``after`` (the position the caller believes
        current), the position row is moved past the batch in one statement that holds only
        if it still reads ``after``; that row lock orders concurrent projectors as the locked
        read does. Otherwise, or when another process moved it, the position is read under a
        lock and only the events past it are applied."""
        if not logged:
            return await self.position() if after is None else after
        last = logged[-1].notification_id
        try:
            async with self._engine.begin() as conn:
                fresh: Sequence[LoggedEvent] = [
                    i for i in logged if i.notification_id > (after or 0)
                ]
                if after is None or not fresh or not await self._moved(conn, after, last):
                    current = await self._locked_position(conn)
                    fresh = [item for item in logged if item.notification_id > current]
                    if not fresh:
                        return current
                    await conn.execute(
                        update(positions)
                        .where(positions.c.name == PROJECTION)
                        .values(position=fresh[-1].notification_id)
                    )
                await self._apply(conn, fresh)
                return fresh[-1].notification_id
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def _moved(self, conn: AsyncConnection, after: int, last: int) -> bool:
        """Moves the position from ``after`` to ``last``; False when it was not at ``after``."""
        if last <= after:
            return False
        moved = await conn.execute(
            update(positions)
            .where(positions.c.name == PROJECTION, positions.c.position == after)
            .values(position=last)
        )
        return moved.rowcount == 1

    async def _locked_position(self, conn: AsyncConnection) -> int:
        query = select(positions.c.position).where(positions.c.name == PROJECTION)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()
        value = (await conn.execute(query)).scalar()
        if value is None:
            await conn.execute(insert(positions).values(name=PROJECTION, position=0))
            return 0
        return int(value)

    async def _apply(self, conn: AsyncConnection, logged: Sequence[LoggedEvent]) -> None:
        """A few statements per batch whatever its size: the jobs it touches read with their
        datasources in one query, the changed rows written in one upsert (where the dialect
        has one), the new jobs' datasources in one insert, the ended jobs' progress and leases
        dropped in one statement each."""
        ids = {item.event.originator_id for item in logged}
        before: dict[Any, JobSummary] = {s.job_id: s for s in await _summaries_of(conn, ids)}
        known = dict(before)
        for item in logged:
            job_id = item.event.originator_id
            summary = summarise(known.get(job_id), item.event)
            if summary is not None:
                known[job_id] = summary
        new = [summary for job_id, summary in known.items() if job_id not in before]
        changed = [
            summary
            for job_id, summary in known.items()
            if job_id in before and before[job_id] != summary
        ]
        await self._write_rows(conn, new, changed)
        if new:
            await conn.execute(
                delete(job_datasources).where(job_datasources.c.job_id.in_([s.job_id for s in new]))
            )
            names = [
                {"job_id": s.job_id, "config_name": name} for s in new for name in s.datasources
            ]
            if names:
                await conn.execute(insert(job_datasources), names)
        ended = [job_id for job_id, summary in known.items() if summary.status in ENDED]
        if ended:
            await conn.execute(delete(job_progress).where(job_progress.c.job_id.in_(ended)))
            await conn.execute(delete(job_leases).where(job_leases.c.job_id.in_(ended)))

    async def _write_rows(
        self, conn: AsyncConnection, new: list[JobSummary], changed: list[JobSummary]
    ) -> None:
        upsert = _UPSERT_JOBS.get(conn.dialect.name)
        if upsert is not None:
            rows = [_row(s) for s in (*new, *changed)]
            if rows:
                # Many rows go as one multi-row statement (SQLAlchemy's "insertmanyvalues").
                await conn.execute(upsert, rows)
            return
        if new:
            await conn.execute(insert(jobs), [_row(s) for s in new])
        for summary in changed:
            row = _row(summary)
            await conn.execute(
                update(jobs)
                .where(jobs.c.job_id == summary.job_id)
                .values({name: row[name] for name in _CHANGING})
            )

    async def position(self) -> int:
        try:
            async with self._engine.connect() as conn:
                value = (
                    await conn.execute(
                        select(positions.c.position).where(positions.c.name == PROJECTION)
                    )
                ).scalar()
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error
        return int(value or 0)

    async def is_connection_in_use(self, config_name: str, *, tenant: Tenant) -> bool:
        query = (
            select(jobs.c.job_id)
            .join(job_datasources, job_datasources.c.job_id == jobs.c.job_id)
            .where(
                job_datasources.c.config_name == config_name,
                jobs.c.tenant == tenant.id,
                jobs.c.status.in_(ACTIVE),
            )
            .limit(1)
        )
        try:
            async with self._engine.connect() as conn:
                return (await conn.execute(query)).first() is not None
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def stalled(
        self, *, now: datetime, pending_before: datetime, limit: int = 100
    ) -> list[JobSummary]:
        # A lease row of the current claim (or a newer one the projection has not seen yet)
        # overrides the lease recorded with the claim: its heartbeat renews it.
        current_lease = and_(
            job_leases.c.job_id == jobs.c.job_id, job_leases.c.attempt >= jobs.c.attempts
        )
        lease_end = func.coalesce(job_leases.c.lease_until, jobs.c.lease_until)
        query = (
            select(jobs)
            .outerjoin(job_leases, current_lease)
            .where(
                or_(
                    and_(jobs.c.status == "pending", jobs.c.created_at < pending_before),
                    and_(jobs.c.status == "processing", lease_end <= now),
                )
            )
            .order_by(jobs.c.created_at)
            .limit(limit)
        )
        return await self._listed(query)

    async def search(self, search: JobSearch) -> list[JobSummary]:
        conditions = [jobs.c.tenant == search.tenant.id]
        if search.status is not None:
            conditions.append(jobs.c.status == search.status)
        if search.source is not None:
            conditions.append(jobs.c.source == search.source)
        if search.config_name is not None:
            reads = select(job_datasources.c.job_id).where(
                job_datasources.c.job_id == jobs.c.job_id,
                job_datasources.c.config_name == search.config_name,
            )
            conditions.append(reads.exists())
        if search.created_from is not None:
            conditions.append(jobs.c.created_at >= search.created_from)
        if search.created_until is not None:
            conditions.append(jobs.c.created_at < search.created_until)
        if search.older_than is not None:
            created, job_id = search.older_than
            conditions.append(
                or_(
                    jobs.c.created_at < created,
                    and_(jobs.c.created_at == created, jobs.c.job_id < job_id),
                )
            )
        query = (
            select(jobs)
            .where(*conditions)
            .order_by(jobs.c.created_at.desc(), jobs.c.job_id.desc())
            .limit(search.limit)
        )
        return await self._listed(query)

    async def _listed(self, query: Any) -> list[JobSummary]:
        """The summaries of the job rows ``query`` selects, in its order."""
        try:
            async with self._engine.connect() as conn:
                rows = (await conn.execute(query)).all()
                return await _summaries(conn, rows)
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def check(self) -> None:
        await self.position()

    async def record(self, progress: JobProgress) -> None:
        values = {
            "attempt": progress.attempt,
            "rows": progress.rows,
            "bytes": progress.bytes,
            "updated_at": progress.updated_at,
        }
        try:
            async with self._engine.begin() as conn:
                updated = await conn.execute(
                    update(job_progress)
                    .where(job_progress.c.job_id == progress.job_id)
                    .values(**values)
                )
                if updated.rowcount == 0:
                    await conn.execute(
                        insert(job_progress).values(job_id=progress.job_id, **values)
                    )
        except sa_exc.IntegrityError:
            return  # a report of the same job raced this one in; the next one wins
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def progresses(self, job_ids: Collection[UUID]) -> dict[UUID, JobProgress]:
        if not job_ids:
            return {}
        query = select(job_progress).where(job_progress.c.job_id.in_(job_ids))
        try:
            async with self._engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error
        return {
            row.job_id: JobProgress(row.job_id, row.attempt, row.rows, row.bytes, row.updated_at)
            for row in rows
        }


_CHANGING = ("status", "created_at", "lease_until", "attempts")
"""The columns of a job row that its events change (its tenant never does)."""


def _upsert_jobs(upsert: Any) -> Any:
    statement = upsert(jobs)
    return statement.on_conflict_do_update(
        index_elements=[jobs.c.job_id],
        set_={name: statement.excluded[name] for name in _CHANGING},
    )


_UPSERT_JOBS: dict[str, Any] = {
    "postgresql": _upsert_jobs(postgresql.insert),
    "sqlite": _upsert_jobs(sqlite.insert),
}
"""Per dialect that has ``INSERT ... ON CONFLICT DO UPDATE``: new and changed job rows in one
statement, built once (its compiled form is cached)."""


def _row(summary: JobSummary) -> dict[str, Any]:
    return {
        "job_id": summary.job_id,
        "tenant": summary.tenant.id,
        "status": summary.status,
        "created_at": summary.created_at,
        "lease_until": summary.lease_until,
        "attempts": summary.attempts,
        "source": summary.source,
    }


async def _summaries_of(conn: AsyncConnection, ids: Collection[Any]) -> list[JobSummary]:
    """Summaries of the jobs among ``ids`` that the index holds, with their datasources, in
    one query."""
    found = await conn.execute(
        select(jobs, job_datasources.c.config_name)
        .outerjoin(job_datasources, job_datasources.c.job_id == jobs.c.job_id)
        .where(jobs.c.job_id.in_(ids))
        .order_by(jobs.c.job_id, job_datasources.c.config_name)
    )
    rows: dict[Any, Any] = {}
    names: dict[Any, list[str]] = {}
    for row in found:
        if row.job_id not in rows:
            rows[row.job_id] = row
            names[row.job_id] = []
        if row.config_name is not None:
            names[row.job_id].append(row.config_name)
    return [
        JobSummary(
            row.job_id,
            row.status,
            tuple(names[job_id]),
            row.created_at,
            row.lease_until,
            row.attempts,
            Tenant(row.tenant),
            row.source,
        )
        for job_id, row in rows.items()
    ]


def _upgrade(conn: Connection) -> None:
    upgrade_table(conn, jobs)


async def _summaries(conn: AsyncConnection, rows: Sequence[Any]) -> list[JobSummary]:
    """Summaries of ``rows``, their datasources read in one query."""
    ids = [row.job_id for row in rows]
    names: dict[Any, list[str]] = {job_id: [] for job_id in ids}
    if ids:
        found = await conn.execute(
            select(job_datasources.c.job_id, job_datasources.c.config_name)
            .where(job_datasources.c.job_id.in_(ids))
            .order_by(job_datasources.c.config_name)
        )
        for job_id, name in found:
            names[job_id].append(name)
    return [
        JobSummary(
            row.job_id,
            row.status,
            tuple(names[row.job_id]),
            row.created_at,
            row.lease_until,
            row.attempts,
            Tenant(row.tenant),
            row.source,
        )
        for row in rows
    ]
