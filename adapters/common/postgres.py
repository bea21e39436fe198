"""Where a PostgreSQL database is: parsed once from its URL, handed to each adapter."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

import asyncpg

from domain.errors import Unavailable


@dataclass(frozen=True, slots=True)
class PostgresAddress:
    """A PostgreSQL database, from a ``postgresql://user:pass@host:port/dbname`` URL.

    The URL is parsed once, here; the event store (asyncpg) and the SQL adapters (SQLAlchemy on
    asyncpg) each connect from these fields. ``options`` are the URL's query parameters, which
    only the SQLAlchemy engine passes on (as asyncpg connect arguments).
    """

    database: str
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    password: str = field(default="", repr=False)
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_url(cls, url: str) -> PostgresAddress:
        """Raises ``ValueError`` for another scheme, a bad port or a URL without a database."""
        parts = urlsplit(url)
        if parts.scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
            raise ValueError("not a postgresql:// URL")
        database = unquote(parts.path.lstrip("/"))
        if not database:
            raise ValueError("the PostgreSQL URL names no database")
        return cls(
            database=database,
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password or ""),
            options=tuple(parse_qsl(parts.query)),
        )


async def connect(address: PostgresAddress, *, timeout: float) -> asyncpg.Connection:
    """One connection of its own to the database, outside any pool, that prepares nothing (no
    statement cache): for a check, or a ``LISTEN``. Raises the driver's errors."""
    return await asyncpg.connect(
        host=address.host,
        port=address.port,
        database=address.database,
        user=address.user,
        password=address.password,
        timeout=timeout,
        statement_cache_size=0,
    )


async def reach(address: PostgresAddress, *, timeout: float = 5.0) -> None:
    """Opens one connection to the database and closes it: raises ``Unavailable`` (its cause
    the driver's error) when the server cannot be reached or refuses the login."""
    try:
        connection = await connect(address, timeout=timeout)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
        raise Unavailable("the database cannot be reached") from error
    await connection.close()
