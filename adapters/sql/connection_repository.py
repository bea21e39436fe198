"""Stored connections on SQLAlchemy 2 (async): asyncpg on PostgreSQL, aiosqlite on SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    false,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.sql.tables import (
    CONNECTIONS_OBSOLETE_INDEXES,
    connections,
    create_tables,
    metadata,
    upgrade_table,
)
from application.ports.connection_repository import (
    ConnectionPage,
    ConnectionQuery,
    ConnectionRepository,
)
from domain.connection import Connection, DatabaseType, SealedSecret, SslSettings
from domain.errors import ConcurrencyConflict, EntityConflict, EntityNotFound, Unavailable
from domain.tenant import Tenant

__all__ = ["SqlaConnectionRepository"]

_c = connections.c

# SQLSTATE classes meaning the database cannot be used right now: connection exception,
# invalid authorization, invalid catalog (database missing), insufficient resources,
# operator intervention (shutdown, starting up), system error.
_UNAVAILABLE_SQLSTATES = frozenset({"08", "28", "3D", "53", "57", "58"})


class SqlaConnectionRepository(ConnectionRepository):
    """``ConnectionRepository`` on a SQL database: one table, every row with its tenant, every
    statement filtered by it. Soft-deleted rows are invisible to reads.

    Build it on the database's engine (``create_engine_for``, shared with the other SQL
    adapters) and call ``create_schema()`` once at start: it also upgrades a table created
    before tenants existed (its rows become the single tenant's). ``close()`` disposes of the engine
    only when ``owns_engine`` says it is this repository's own.
    """

    def __init__(self, engine: AsyncEngine, *, owns_engine: bool = False) -> None:
        self._engine = engine
        self._owns_engine = owns_engine
        # Single-statement reads need no transaction: on the same pool, without the BEGIN and
        # ROLLBACK round trips around each.
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def create_schema(self) -> None:
        async with self._guard():
            await create_tables(
                self._engine,
                metadata,
                [connections],
                upgrade=lambda conn: upgrade_table(conn, connections, CONNECTIONS_OBSOLETE_INDEXES),
            )

    async def close(self) -> None:
        if self._owns_engine:
            await self._engine.dispose()

    async def check(self) -> None:
        async with self._guard(), self._engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def add(self, connection: Connection) -> None:
        async with self._guard():
            try:
                async with self._engine.begin() as conn:
                    await conn.execute(insert(connections).values(_to_row(connection)))
            except sa_exc.IntegrityError as e:
                raise EntityConflict(
                    "connection", field="configName", value=connection.config_name
                ) from e

    async def get(self, connection_id: UUID, *, tenant: Tenant) -> Connection | None:
        async with self._guard(), self._reads.connect() as conn:
            row = (await conn.execute(_live(tenant).where(_c.id == connection_id))).first()
        return _from_row(row._mapping) if row else None

    async def by_config_names(
        self, names: Sequence[str], *, tenant: Tenant
    ) -> dict[str, Connection]:
        if not names:
            return {}
        params = {"tenant": tenant.id, "names": sorted(set(names))}
        async with self._guard(), self._reads.connect() as conn:
            rows = (await conn.execute(_BY_CONFIG_NAMES, params)).all()
        found = (_from_row(r._mapping) for r in rows)
        return {c.config_name: c for c in found}

    async def list(self, query: ConnectionQuery, *, tenant: Tenant) -> ConnectionPage:
        conditions = _filters(query, tenant, self._engine.dialect.name)
        order = (
            (_c.created_at.desc(), _c.id.desc())
            if query.descending
            else (_c.created_at.asc(), _c.id.asc())
        )
        page = (
            _live(tenant)
            .where(*conditions)
            .order_by(*order)
            .limit(max(query.limit, 0))
            .offset((max(query.page, 1) - 1) * max(query.limit, 0))
        )
        count = select(func.count()).select_from(connections).where(*conditions)
        async with self._guard(), self._engine.connect() as conn:
            total = (await conn.execute(count)).scalar_one()
            rows = (await conn.execute(page)).all() if query.limit > 0 else []
        return ConnectionPage(items=[_from_row(r._mapping) for r in rows], total=total)

    async def soft_delete(self, connection_id: UUID, now: datetime, *, tenant: Tenant) -> bool:
        """Marks the row deleted and erases its sealed credentials."""
        erased = {
            **_secret("password", None),
            **_secret("ssl_ca", None),
            **_secret("ssl_cert", None),
            **_secret("ssl_key", None),
        }
        stmt = (
            update(connections)
            .where(_c.id == connection_id, _c.tenant == tenant.id, _c.deleted_at.is_(None))
            .values(deleted_at=now, updated_at=now, version=_c.version + 1, **erased)
        )
        async with self._guard(), self._engine.begin() as conn:
            result = await conn.execute(stmt)
        return bool(result.rowcount)

    async def update(self, connection: Connection) -> Connection:
        """Writes ``connection`` (all fields but ``created_at``) when the stored version is
        ``connection.version - 1``. Raises ``EntityNotFound`` when there is no live connection
        with its id, ``ConcurrencyConflict`` when another change came first and ``EntityConflict``
        (FET-1002) when its config name is taken."""
        if connection.updated_at is None:
            raise ValueError("an updated connection needs updated_at")
        values = _to_row(connection)
        for key in ("id", "tenant", "created_at", "deleted_at"):
            values.pop(key)
        stmt = (
            update(connections)
            .where(
                _c.id == connection.id,
                _c.tenant == connection.tenant.id,
                _c.deleted_at.is_(None),
                _c.version == connection.version - 1,
            )
            .values(values)
            .returning(*connections.c)
        )
        async with self._guard():
            try:
                async with self._engine.begin() as conn:
                    row = (await conn.execute(stmt)).first()
                    exists = (
                        row is not None
                        or (
                            await conn.execute(
                                _live(connection.tenant).where(_c.id == connection.id)
                            )
                        ).first()
                    )
            except sa_exc.IntegrityError as e:
                raise EntityConflict(
                    "connection", field="configName", value=connection.config_name
                ) from e
        if row is not None:
            return _from_row(row._mapping)
        if not exists:
            raise EntityNotFound("connection")
        raise ConcurrencyConflict(f"connection {connection.id} was changed by someone else")

    async def assign_product(
        self, connection_id: UUID, product: str, now: datetime, *, tenant: Tenant
    ) -> Connection | None:
        """Gives an unowned live connection to ``product`` in one conditional update.
        Returns None when the connection is missing, deleted or already owned."""
        stmt = (
            update(connections)
            .where(
                _c.id == connection_id,
                _c.tenant == tenant.id,
                _c.deleted_at.is_(None),
                or_(_c.product_name == "", _c.product_name.is_(None)),
            )
            .values(product_name=product, updated_at=now, version=_c.version + 1)
            .returning(*connections.c)
        )
        async with self._guard(), self._engine.begin() as conn:
            row = (await conn.execute(stmt)).first()
        return _from_row(row._mapping) if row else None

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        try:
            yield
        except sa_exc.DBAPIError as e:
            if (
                isinstance(e, sa_exc.OperationalError | sa_exc.InterfaceError)
                or e.connection_invalidated
                or str(getattr(e.orig, "sqlstate", None) or "")[:2] in _UNAVAILABLE_SQLSTATES
            ):
                raise Unavailable() from e
            raise
        except (sa_exc.DisconnectionError, sa_exc.TimeoutError, OSError, TimeoutError) as e:
            raise Unavailable() from e


# Built once: on the submission path, building and caching the statement per call costs more
# than running it.
_BY_CONFIG_NAMES = select(connections).where(
    _c.tenant == bindparam("tenant"),
    _c.deleted_at.is_(None),
    _c.config_name.in_(bindparam("names", expanding=True)),
)


def _live(tenant: Tenant) -> Select[Any]:
    return select(connections).where(_c.tenant == tenant.id, _c.deleted_at.is_(None))


def _metadata_equals(dialect: str, key: str, value: str) -> ColumnElement[bool]:
    """``metadata[key]`` is a JSON string equal to ``value`` (numbers, booleans and objects
    never match, whatever their text)."""
    element = _c.metadata[key]
    if dialect == "postgresql":
        is_text = func.json_typeof(element) == "string"
    elif '"' in key:  # SQLite JSON paths cannot quote it; no such key can be stored as text
        return false()
    else:
        is_text = func.json_type(_c.metadata, f'$."{key}"') == "text"
    return and_(is_text, element.as_string() == value)


def _filters(query: ConnectionQuery, tenant: Tenant, dialect: str) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [_c.tenant == tenant.id, _c.deleted_at.is_(None)]
    if query.unassigned:
        conditions.append(or_(_c.product_name == "", _c.product_name.is_(None)))
    elif query.product_name is not None:
        conditions.append(_c.product_name == query.product_name)
    for key, value in sorted(query.metadata.items()):
        conditions.append(_metadata_equals(dialect, key, value))
    if query.type:
        conditions.append(_c.type == query.type.upper())
    if query.created_from is not None:
        conditions.append(_c.created_at >= query.created_from)
    if query.created_to is not None:
        conditions.append(_c.created_at <= query.created_to)
    return conditions


def _secret(prefix: str, secret: SealedSecret | None) -> dict[str, str | None]:
    return {
        f"{prefix}_ciphertext": secret.ciphertext if secret else None,
        f"{prefix}_key_version": secret.key_version if secret else None,
    }


def _to_row(c: Connection) -> dict[str, Any]:
    if c.created_at is None:
        raise ValueError("a stored connection needs created_at")
    ssl = c.ssl
    return {
        "id": c.id,
        "tenant": c.tenant.id,
        "product_name": c.product_name or "",
        "config_name": c.config_name,
        "type": c.type.value,
        "host": c.host,
        "port": c.port,
        "database_name": c.database_name,
        "schema": c.schema,
        "user_name": c.user_name,
        **_secret("password", c.password),
        "ssl_mode": ssl.mode if ssl else None,
        **_secret("ssl_ca", ssl.ca if ssl else None),
        **_secret("ssl_cert", ssl.cert if ssl else None),
        **_secret("ssl_key", ssl.key if ssl else None),
        "metadata": dict(c.metadata),
        "created_at": c.created_at,
        "updated_at": c.updated_at or c.created_at,
        "deleted_at": None,
        "version": c.version,
    }


def _unseal(row: Mapping[Any, Any], prefix: str) -> SealedSecret | None:
    ciphertext = row[f"{prefix}_ciphertext"]
    if ciphertext is None:
        return None
    return SealedSecret(ciphertext=ciphertext, key_version=row[f"{prefix}_key_version"] or "")


def _from_row(row: Mapping[Any, Any]) -> Connection:
    ssl = None
    if row["ssl_mode"] is not None:
        ssl = SslSettings(
            mode=row["ssl_mode"],
            ca=_unseal(row, "ssl_ca"),
            cert=_unseal(row, "ssl_cert"),
            key=_unseal(row, "ssl_key"),
        )
    return Connection(
        id=row["id"],
        product_name=row["product_name"] or "",
        config_name=row["config_name"],
        type=DatabaseType(row["type"]),
        host=row["host"],
        port=row["port"],
        database_name=row["database_name"],
        user_name=row["user_name"],
        password=_unseal(row, "password"),
        schema=row["schema"],
        ssl=ssl,
        metadata=dict(row["metadata"] or {}),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        version=row["version"],
        tenant=Tenant(row["tenant"]),
    )
