"""PostgreSQL connections on asyncpg: the reference's parameters and SSL modes (§3.3).

Host, port, user, password and database are driver arguments (no DSN). SSL modes: ``""`` and
``disable`` no TLS; ``allow`` and ``prefer`` TLS when the server offers it; ``require`` TLS
without verification; ``verify-ca`` the server verified against ``ssl.ca`` (else the system
store), ``verify-full`` its host name too. A client certificate and key are used when given.

A connection that cannot be opened raises ``DatasourceUnavailable`` with the reason the error
gives: the standard library's (``common.failures``), or the server's SQLSTATE (class 28: the
authentication failed; 3D000: no such database).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from adapters.datasources.common import failures
from adapters.datasources.common.tls import client_context, load_client_certificate
from application.errors import ConnectFailure, DatasourceUnavailable, InvalidSslMode
from domain.connection import Endpoint
from domain.errors import FetcherError


def _server_reason(error: BaseException) -> ConnectFailure | None:
    sqlstate = str(getattr(error, "sqlstate", "") or "")
    if sqlstate.startswith("28"):
        return ConnectFailure.AUTHENTICATION_FAILED
    if sqlstate == "3D000":
        return ConnectFailure.DATABASE_NOT_FOUND
    return None


def unavailable(error: BaseException) -> DatasourceUnavailable:
    """The error of a connection (or connection test) that failed because of ``error``."""
    return failures.unavailable(error, _server_reason)


def ssl_argument(endpoint: Endpoint) -> bool | str | ssl.SSLContext:
    """asyncpg's ``ssl`` argument for the endpoint's mode (reference §3.3, CA/cert/key applied)."""
    mode = endpoint.ssl_mode
    if mode in ("", "disable"):
        return False
    if mode in ("allow", "prefer"):
        return "prefer"
    if mode == "require":
        context = client_context(verify=False)
    elif mode in ("verify-ca", "verify-full"):
        context = client_context(
            verify=True, ca=endpoint.ssl_ca, check_hostname=mode == "verify-full"
        )
    else:
        raise InvalidSslMode(mode)
    if endpoint.ssl_cert:
        load_client_certificate(context, endpoint.ssl_cert, endpoint.ssl_key)
    return context


def _arguments(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "host": endpoint.host,
        "port": endpoint.port,
        "user": endpoint.user_name,
        "password": endpoint.password,
        "database": endpoint.database_name,
        "ssl": ssl_argument(endpoint),
        "statement_cache_size": 0,
        "server_settings": {"application_name": "fetcher"},
    }


async def connect(endpoint: Endpoint, timeout: float) -> asyncpg.Connection:
    """A connection without a statement cache; ``DatasourceUnavailable`` when it cannot be
    opened."""
    arguments = _arguments(endpoint)
    try:
        return await asyncpg.connect(**arguments, timeout=timeout)
    except FetcherError:
        raise
    except Exception as error:
        raise unavailable(error) from error


async def open_pool(
    endpoint: Endpoint,
    size: int,
    idle_seconds: float,
    timeout: float,
    init: Callable[[asyncpg.Connection], Awaitable[None]],
) -> asyncpg.Pool:
    """A pool of up to ``size`` connections like ``connect``'s, opened on demand (none yet),
    each closed after ``idle_seconds`` unused and prepared by ``init`` when opened. A
    connection comes back without a session reset (``session_unchanged``)."""
    pool = asyncpg.create_pool(
        **_arguments(endpoint),
        timeout=timeout,
        min_size=0,
        max_size=size,
        max_inactive_connection_lifetime=idle_seconds,
        init=init,
        reset=session_unchanged,
    )
    return await pool


async def session_unchanged(connection: asyncpg.Connection) -> None:
    """What a pooled connection needs when it comes back, beyond asyncpg's own rolling back of
    a transaction left open: nothing. The readers change no session state (settings are
    ``SET LOCAL`` in their read-only transaction, cursors live in it, nothing listens or
    takes advisory locks), so asyncpg's default reset (``RESET ALL``, ``CLOSE ALL``,
    ``UNLISTEN *``, unlocking) would be a round trip to the datasource per use for nothing."""


async def close_pool(pool: asyncpg.Pool) -> None:
    """Waits up to 60 seconds for leased connections to come back, then closes the rest."""
    try:
        await asyncio.wait_for(pool.close(), 60)
    except Exception:
        pool.terminate()


async def close(connection: asyncpg.Connection) -> None:
    """Closes within 5 seconds, else drops the connection."""
    try:
        await connection.close(timeout=5)
    except Exception:
        connection.terminate()
    except BaseException:
        connection.terminate()
        raise
