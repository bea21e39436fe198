"""SQLAlchemy Core tables, and the engine factory shared by the SQL adapters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Dialect,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    Uuid,
    event,
    inspect,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.schema import CreateColumn
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_incrementing

from adapters.common.postgres import PostgresAddress
from adapters.sql.quiet_logs import hide_statement_values

metadata = MetaData()

POOL_SIZE = 10
POOL_OVERFLOW = 10
POOL_RECYCLE_SECONDS = 1800


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every dialect.

    Values are converted to UTC before they are written (naive ones are taken to be UTC);
    SQLite stores them naive, so they are read back with UTC attached.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _secret_columns(prefix: str, *, nullable: bool = True) -> list[Column[Any]]:
    return [
        Column(f"{prefix}_ciphertext", Text, nullable=nullable),
        Column(f"{prefix}_key_version", String(64), nullable=nullable),
    ]


_LIVE = text("deleted_at IS NULL")

connections = Table(
    "fetcher_connections",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("tenant", String(64), nullable=False, server_default=""),
    Column("product_name", String(100), nullable=False, server_default=""),
    Column("config_name", String(255), nullable=False),
    Column("type", String(20), nullable=False),
    Column("host", String(255), nullable=False),
    Column("port", Integer, nullable=False),
    Column("database_name", String(255), nullable=False),
    Column("schema", String(255), nullable=True),
    Column("user_name", String(255), nullable=False),
    *_secret_columns("password"),
    Column("ssl_mode", String(32), nullable=True),
    *_secret_columns("ssl_ca"),
    *_secret_columns("ssl_cert"),
    *_secret_columns("ssl_key"),
    Column("metadata", JSON, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("deleted_at", UtcDateTime, nullable=True),
    Column("version", Integer, nullable=False, server_default="1"),
    Index(
        "uq_fetcher_connections_tenant_config_name_live",
        "tenant",
        "config_name",
        unique=True,
        postgresql_where=_LIVE,
        sqlite_where=_LIVE,
    ),
    Index("ix_fetcher_connections_tenant_created_at", "tenant", "created_at"),
)
CONNECTIONS_OBSOLETE_INDEXES = (
    "uq_fetcher_connections_config_name_live",
    "ix_fetcher_connections_created_at",
)
"""Indexes of the table before it had tenants (config names were unique across the table)."""


def create_engine_for(
    database: PostgresAddress | Path, *, connect_timeout: float = 5.0, echo: bool = False
) -> AsyncEngine:
    """An async engine, with its pool: asyncpg for a PostgreSQL database, aiosqlite for a
    SQLite file. Build one per database and share it between the SQL adapters.

    SQLite files get WAL journaling and a busy timeout, so readers and writers of other
    connections (and of the event store's own threads) wait for each other instead of failing.
    Statement parameters and rows (sealed credentials among them) never reach a log.
    """
    hide_statement_values()
    if isinstance(database, Path):
        if str(database) != ":memory:":
            database.parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{database}", echo=echo, hide_parameters=True
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    url = URL.create(
        "postgresql+asyncpg",
        username=database.user,
        password=database.password,
        host=database.host,
        port=database.port,
        database=database.database,
        query=dict(database.options),
    )
    # A pool that covers a busy API's concurrency: connections beyond ``pool_size`` are
    # closed on return, so a pool smaller than the load opens a connection per request. No
    # ping at checkout (three round trips on asyncpg); a connection the server closed while it
    # was pooled (a restart) is seen closed by asyncpg and replaced at checkout, before a
    # statement can fail on it (``_replace_closed``).
    engine = create_async_engine(
        url,
        echo=echo,
        hide_parameters=True,
        pool_size=POOL_SIZE,
        max_overflow=POOL_OVERFLOW,
        pool_recycle=POOL_RECYCLE_SECONDS,
        # "fetcher" in pg_stat_activity: an operator sees which sessions are the service's
        connect_args={
            "timeout": connect_timeout,
            "server_settings": {"application_name": "fetcher"},
        },
    )
    event.listen(engine.sync_engine, "checkout", _replace_closed)
    return engine


def _replace_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A pooled connection asyncpg already knows is closed (the server ended the session: a
    restart, an idle timeout, a terminated backend) is replaced before use: no round trip, and
    no statement fails on it. One that died silently still fails its first statement."""
    connection = getattr(dbapi_connection, "driver_connection", None)
    if connection is not None and connection.is_closed():
        raise sa_exc.DisconnectionError("the pooled connection was closed by the server")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def upgrade_table(
    connection: Connection, table: Table, obsolete_indexes: Sequence[str] = ()
) -> None:
    """Brings a table an older version created up to date, in the caller's transaction: adds
    the columns it lacks (each new column has a server default, which existing rows take),
    drops the indexes it no longer has and creates the ones it lacks. A table that has every
    column is current and left alone."""
    present = {column["name"] for column in inspect(connection).get_columns(table.name)}
    missing = [column for column in table.columns if column.name not in present]
    if not missing:
        return
    preparer = connection.dialect.identifier_preparer
    # PostgreSQL: IF NOT EXISTS, as another process may be adding it at the same moment.
    add = "ADD COLUMN IF NOT EXISTS" if connection.dialect.name == "postgresql" else "ADD COLUMN"
    for column in missing:
        ddl = CreateColumn(column).compile(dialect=connection.dialect)
        connection.execute(text(f"ALTER TABLE {preparer.format_table(table)} {add} {ddl}"))
    for name in obsolete_indexes:
        connection.execute(text(f"DROP INDEX IF EXISTS {preparer.quote(name)}"))
    for index in table.indexes:
        index.create(connection, checkfirst=True)


async def create_tables(
    engine: AsyncEngine,
    schema: MetaData,
    tables: list[Table] | None = None,
    *,
    upgrade: Callable[[Connection], None] | None = None,
) -> None:
    """Creates the tables if missing, then runs ``upgrade`` (see ``upgrade_table``) in the same
    transaction. Processes starting together race on PostgreSQL's ``CREATE ... IF NOT EXISTS``
    and ``ALTER TABLE`` (a unique violation, a duplicate column, or "tuple concurrently
    updated", in its catalog); the loser retries."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(
            (sa_exc.IntegrityError, sa_exc.ProgrammingError, sa_exc.InternalError)
        ),
        stop=stop_after_attempt(5),
        wait=wait_incrementing(start=0.1, increment=0.1),
        reraise=True,
    ):
        with attempt:
            async with engine.begin() as conn:
                await conn.run_sync(schema.create_all, tables=tables)
                if upgrade is not None:
                    await conn.run_sync(upgrade)
