"""The leases of running jobs in SQL: one row per job, renewed in place (see ``JobLeases``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg
from sqlalchemy import Column, Integer, MetaData, String, Table, Uuid, insert, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.sql.tables import UtcDateTime
from application.ports.job_leases import JobLeases, LeaseHold
from domain.errors import Unavailable

lease_metadata = MetaData()

job_leases = Table(
    "fetcher_job_leases",
    lease_metadata,
    Column("job_id", Uuid, primary_key=True),
    Column("attempt", Integer, nullable=False),
    Column("worker_id", String(200), nullable=False),
    Column("lease_until", UtcDateTime, nullable=False),
)

_UPSERTS: dict[str, Any] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}
"""The dialects whose ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` takes a lease in one
statement (one round trip; a worker's claim waits on it)."""

# On asyncpg the statements of a job's claim and of its heartbeat run on the pooled connection's
# driver, outside a transaction (each is one atomic statement): one round trip each, and a
# fraction of the CPU SQLAlchemy's execution spends around a single-row statement.
_PG_TAKE = (
    "INSERT INTO fetcher_job_leases AS held (job_id, attempt, worker_id, lease_until)"
    " VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt,"
    " worker_id = excluded.worker_id, lease_until = excluded.lease_until"
    " WHERE held.attempt < excluded.attempt AND held.lease_until <= $5"
    " RETURNING held.job_id"
)
_PG_HELD_UPDATE = (
    "UPDATE fetcher_job_leases SET lease_until = $4"
    " WHERE job_id = $1 AND attempt = $2 AND worker_id = $3"
)
_PG_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


class SqlaJobLeases(JobLeases):
    """Each operation is one statement (``take`` an upsert, or on other databases an update
    then an insert for a job's first claim), so the database's row lock decides between
    concurrent takers and renewals. On PostgreSQL (asyncpg) ``take``, ``renew`` and
    ``release`` run on the driver outside a transaction; a connection that failed there is
    dropped from the pool (the others are found dead, if they are, by their own next use)."""

    _engine: AsyncEngine

    async def take(
        self, job_id: UUID, attempt: int, worker_id: str, now: datetime, until: datetime
    ) -> bool:
        if self._on_asyncpg():
            async with self._driver() as driver:
                taken = await driver.fetchval(
                    _PG_TAKE, job_id, attempt, worker_id, _utc(until), _utc(now)
                )
            return taken is not None
        values = {"attempt": attempt, "worker_id": worker_id, "lease_until": until}
        upsert = _UPSERTS.get(self._engine.dialect.name)
        if upsert is not None:
            return await self._take_in_one_statement(upsert, job_id, values, now)
        try:
            async with self._engine.begin() as conn:
                taken = await conn.execute(
                    update(job_leases)
                    .where(
                        job_leases.c.job_id == job_id,
                        job_leases.c.attempt < attempt,
                        job_leases.c.lease_until <= now,
                    )
                    .values(**values)
                )
                if taken.rowcount == 1:
                    return True
                held = await conn.execute(
                    select(job_leases.c.job_id).where(job_leases.c.job_id == job_id)
                )
                if held.first() is not None:
                    return False
                await conn.execute(insert(job_leases).values(job_id=job_id, **values))
            return True
        except sa_exc.IntegrityError:
            return False  # another worker inserted the first lease
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def _take_in_one_statement(
        self, upsert: Any, job_id: UUID, values: dict[str, Any], now: datetime
    ) -> bool:
        """The first claim inserts the row; a later one updates it only when the lease ran
        out and its attempt is newer: the database's row lock decides between takers (a
        taker that loses sees its ``WHERE`` false on the winner's row and gets no row)."""
        statement = upsert(job_leases).values(job_id=job_id, **values)
        statement = statement.on_conflict_do_update(
            index_elements=[job_leases.c.job_id],
            set_={name: statement.excluded[name] for name in values},
            where=(job_leases.c.attempt < statement.excluded.attempt)
            & (job_leases.c.lease_until <= now),
        ).returning(job_leases.c.job_id)
        try:
            async with self._engine.begin() as conn:
                return (await conn.execute(statement)).first() is not None
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def renew(self, job_id: UUID, attempt: int, worker_id: str, until: datetime) -> bool:
        return await self._held_update(job_id, attempt, worker_id, until)

    async def release(self, job_id: UUID, attempt: int, worker_id: str, now: datetime) -> None:
        await self._held_update(job_id, attempt, worker_id, now)

    async def _held_update(
        self, job_id: UUID, attempt: int, worker_id: str, until: datetime
    ) -> bool:
        if self._on_asyncpg():
            async with self._driver() as driver:
                status = await driver.execute(
                    _PG_HELD_UPDATE, job_id, attempt, worker_id, _utc(until)
                )
            return bool(status == "UPDATE 1")
        try:
            async with self._engine.begin() as conn:
                done = await conn.execute(
                    update(job_leases)
                    .where(
                        job_leases.c.job_id == job_id,
                        job_leases.c.attempt == attempt,
                        job_leases.c.worker_id == worker_id,
                    )
                    .values(lease_until=until)
                )
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error
        return bool(done.rowcount == 1)

    def _on_asyncpg(self) -> bool:
        return bool(self._engine.dialect.driver == "asyncpg")

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[Any]:
        """The asyncpg connection of a pooled connection, for statements run outside a
        transaction; a failure is ``Unavailable``, and a connection that failed is not reused."""
        try:
            async with self._engine.connect() as conn:
                raw = await conn.get_raw_connection()
                try:
                    yield raw.driver_connection
                except _PG_ERRORS as error:
                    if not isinstance(error, asyncpg.PostgresError) or _connection_lost(error):
                        await conn.invalidate()
                    raise Unavailable() from error
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error

    async def hold(self, job_id: UUID) -> LeaseHold | None:
        try:
            async with self._engine.connect() as conn:
                row = (
                    await conn.execute(select(job_leases).where(job_leases.c.job_id == job_id))
                ).first()
        except sa_exc.DBAPIError as error:
            raise Unavailable() from error
        if row is None:
            return None
        return LeaseHold(row.job_id, row.attempt, row.worker_id, row.lease_until)


def _connection_lost(error: asyncpg.PostgresError) -> bool:
    """Whether a server error leaves the connection unusable (shutdown, admin termination)."""
    return str(getattr(error, "sqlstate", "") or "")[:2] in {"08", "57"}


def _utc(value: datetime) -> datetime:
    """As ``UtcDateTime`` writes it: naive values are taken to be UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
