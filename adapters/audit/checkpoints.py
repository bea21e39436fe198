"""Signed audit checkpoints in the event store's database (PostgreSQL or its SQLite file),
and an in-process twin.

Beside the checkpoints, ``fetcher_audit_checkpoint_jobs`` lists which checkpoints name each
job among their heads (written in the checkpoint's own transaction), so that the checkpoint
holding a job is one indexed read however long the log: a job's proof no longer reads every
checkpoint after it. Checkpoints recorded before the list existed, or by an older process
meanwhile, are listed when a process next creates the schema."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

from sqlalchemy import BigInteger, Column, MetaData, Table, Text, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.common.postgres import PostgresAddress
from adapters.sql.tables import create_engine_for, create_tables, upgrade_table
from application.ports.audit import CheckpointStore
from domain.audit_chain import Checkpoint
from domain.errors import Unavailable

_metadata = MetaData()

checkpoints = Table(
    "fetcher_audit_checkpoints",
    _metadata,
    Column("position", BigInteger, primary_key=True, autoincrement=False),
    Column("record_count", BigInteger, nullable=False),
    Column("root", Text, nullable=False),
    Column("recorded_at", Text, nullable=False),
    Column("key_id", Text, nullable=False),
    Column("heads", Text, nullable=False),
    Column("signature", Text, nullable=False),
    Column("heads_root", Text, nullable=False, server_default=""),
)


checkpoint_jobs = Table(
    "fetcher_audit_checkpoint_jobs",
    _metadata,
    Column("job_id", Text, primary_key=True),
    Column("position", BigInteger, primary_key=True, autoincrement=False),
)
"""Which checkpoints (``position``) name a job among their heads."""

_LIST_HEADS = {
    "postgresql": (
        "INSERT INTO fetcher_audit_checkpoint_jobs (job_id, position) "
        "SELECT head.key, c.position FROM fetcher_audit_checkpoints c, "
        "json_each_text(c.heads::json) head WHERE c.position > :after AND c.position <= :upto "
        "ON CONFLICT DO NOTHING"
    ),
    "sqlite": (
        "INSERT OR IGNORE INTO fetcher_audit_checkpoint_jobs (job_id, position) "
        "SELECT head.key, c.position FROM fetcher_audit_checkpoints c, json_each(c.heads) head "
        "WHERE c.position > :after AND c.position <= :upto"
    ),
}
"""Lists the heads of the checkpoints in ``(after, upto]``, parsed in the database from the
stored heads (no row travels; a row already there is kept)."""
_END = 2**63 - 1


def _upgrade(conn: Connection) -> None:
    """A table from before the heads' roots were signed gains the column (its rows: none);
    the checkpoints past the last one listed (all, the first time) have their heads listed."""
    upgrade_table(conn, checkpoints)
    listed = conn.execute(select(func.max(checkpoint_jobs.c.position))).scalar()
    conn.execute(text(_LIST_HEADS[conn.dialect.name]), {"after": listed or 0, "upto": _END})


_UNAVAILABLE = (sa_exc.OperationalError, sa_exc.InterfaceError, OSError)


def _row(checkpoint: Checkpoint) -> dict[str, object]:
    return {
        "position": checkpoint.position,
        "record_count": checkpoint.count,
        "root": checkpoint.root,
        "recorded_at": checkpoint.recorded_at,
        "key_id": checkpoint.key_id,
        "heads": json.dumps(checkpoint.heads_json() or {}, separators=(",", ":")),
        "signature": checkpoint.signature,
        "heads_root": checkpoint.heads_root,
    }


def _checkpoint(row: object) -> Checkpoint:
    m = row._mapping  # type: ignore[attr-defined]
    return Checkpoint.from_json(
        {
            "position": m["position"],
            "count": m["record_count"],
            "root": m["root"],
            "recorded_at": m["recorded_at"],
            "key_id": m["key_id"],
            "heads": json.loads(m["heads"]),
            "signature": m["signature"],
            "heads_root": m["heads_root"],
        }
    )


class SqlCheckpointStore(CheckpointStore):
    """Checkpoints in table ``fetcher_audit_checkpoints``; owns its engine when built with
    ``for_database``."""

    def __init__(self, engine: AsyncEngine, *, owns_engine: bool = False) -> None:
        self._engine = engine
        self._owns = owns_engine

    @classmethod
    def for_database(cls, database: PostgresAddress | Path) -> SqlCheckpointStore:
        return cls(create_engine_for(database), owns_engine=True)

    async def create_schema(self) -> None:
        try:
            # Processes starting together race to create the table; the loser retries.
            await create_tables(self._engine, _metadata, upgrade=_upgrade)
        except _UNAVAILABLE as e:
            raise Unavailable("the audit checkpoints cannot be stored") from e

    async def latest(self) -> Checkpoint | None:
        query = select(checkpoints).order_by(checkpoints.c.position.desc()).limit(1)
        rows = await self._select(query)
        return rows[0] if rows else None

    async def page(self, after: int = 0, limit: int = 100) -> list[Checkpoint]:
        query = (
            select(checkpoints)
            .where(checkpoints.c.position > after)
            .order_by(checkpoints.c.position)
            .limit(limit)
        )
        return await self._select(query)

    async def holding(self, job_id: UUID) -> Checkpoint | None:
        newest = (
            select(func.max(checkpoint_jobs.c.position))
            .where(checkpoint_jobs.c.job_id == str(job_id))
            .scalar_subquery()
        )
        rows = await self._select(select(checkpoints).where(checkpoints.c.position == newest))
        return rows[0] if rows else None

    async def _select(self, query: object) -> list[Checkpoint]:
        try:
            async with self._engine.connect() as conn:
                result = await conn.execute(query)  # type: ignore[call-overload]
                return [_checkpoint(row) for row in result]
        except _UNAVAILABLE as e:
            raise Unavailable() from e

    async def add(self, checkpoint: Checkpoint) -> None:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(checkpoints.insert().values(**_row(checkpoint)))
                if checkpoint.heads:
                    # A row left by a checkpoint removed from under it is kept as it is.
                    await conn.execute(
                        text(_LIST_HEADS[conn.dialect.name]),
                        {"after": checkpoint.position - 1, "upto": checkpoint.position},
                    )
        except sa_exc.IntegrityError:
            return  # a checkpoint at this position was recorded first (by another relay)
        except _UNAVAILABLE as e:
            raise Unavailable() from e

    async def close(self) -> None:
        if self._owns:
            await self._engine.dispose()


class InMemoryCheckpointStore(CheckpointStore):
    def __init__(self) -> None:
        self.items: dict[int, Checkpoint] = {}

    async def latest(self) -> Checkpoint | None:
        return self.items[max(self.items)] if self.items else None

    async def page(self, after: int = 0, limit: int = 100) -> list[Checkpoint]:
        return [self.items[p] for p in sorted(self.items) if p > after][:limit]

    async def holding(self, job_id: UUID) -> Checkpoint | None:
        key = str(job_id)
        naming = [p for p, c in self.items.items() if c.heads and key in c.heads]
        return self.items[max(naming)] if naming else None

    async def add(self, checkpoint: Checkpoint) -> None:
        self.items.setdefault(checkpoint.position, checkpoint)

    async def close(self) -> None:
        return None
