"""MySQL / MariaDB connections on aiomysql, with the reference's parameters and TLS modes.

Connection (reference §3.2-3.3): host, port, user, password and database are keyword arguments
(no DSN, so any password works; it is sent as UTF-8, as MySQL hashed it). TLS modes: ``""`` /
``false`` none; ``true`` verified TLS (CA from the connection, else the system trust store, host
name checked); ``skip-verify`` TLS without verification; ``preferred`` TLS without verification
when the server offers it, else plain. ``true`` and ``skip-verify`` refuse a server that does not
offer TLS before sending any credential. A client certificate and key are used when given. Each
session runs with ``sql_mode = ''`` and ``time_zone = '+00:00'``.

A connection that cannot be opened raises ``DatasourceUnavailable`` with the reason the error
gives: the standard library's (``common.failures``), or the server's error number (1044, 1045,
1698: the authentication failed; 1049: no such database).
"""

from __future__ import annotations

import asyncio
import ssl

import aiomysql
import pymysql
from pymysql.constants import CLIENT

from adapters.datasources.common import failures
from adapters.datasources.common.tls import client_context, load_client_certificate
from adapters.datasources.mysql.values import DECODERS
from application.errors import ConnectFailure, DatasourceUnavailable, InvalidSslMode
from domain.connection import Endpoint

SESSION_SQL = "SET SESSION sql_mode = '', time_zone = '+00:00'"


_AUTHENTICATION_FAILED = frozenset({1044, 1045, 1698})
_UNKNOWN_DATABASE = 1049


def _server_reason(error: BaseException) -> ConnectFailure | None:
    """The reason in a server error (PyMySQL puts its number first in ``args``)."""
    if not isinstance(error, pymysql.err.MySQLError) or not error.args:
        return None
    number = error.args[0]
    if not isinstance(number, int):
        return None
    if number in _AUTHENTICATION_FAILED:
        return ConnectFailure.AUTHENTICATION_FAILED
    if number == _UNKNOWN_DATABASE:
        return ConnectFailure.DATABASE_NOT_FOUND
    return None


def unavailable(error: BaseException) -> DatasourceUnavailable:
    """The error of a connection (or connection test) that failed because of ``error``."""
    return failures.unavailable(error, _server_reason)


def wire_password(password: str) -> str:
    """aiomysql sends ``password.encode("latin-1")``; this makes those the UTF-8 bytes, which is
    what MySQL hashed when the password was set over a UTF-8 connection."""
    return password.encode("utf-8").decode("latin-1")


def tls_settings(endpoint: Endpoint) -> tuple[ssl.SSLContext | None, bool]:
    """(the TLS context, whether TLS is required) for the endpoint's mode (reference §3.3)."""
    mode = endpoint.ssl_mode
    if mode in ("", "false"):
        return None, False
    if mode == "true":
        context = client_context(verify=True, ca=endpoint.ssl_ca)
    elif mode in ("skip-verify", "preferred"):
        context = client_context(verify=False)
    else:
        raise InvalidSslMode(mode)
    if endpoint.ssl_cert:
        load_client_certificate(context, endpoint.ssl_cert, endpoint.ssl_key)
    return context, mode != "preferred"


class _TlsNotOffered(Exception):
    pass


class _Connection(aiomysql.Connection):  # type: ignore[misc]  # aiomysql ships no types
    """aiomysql's connection, except that it will not authenticate in plain text when TLS is
    required (aiomysql itself carries on without TLS when the server does not offer it)."""

    tls_required = False

    async def _request_authentication(self) -> None:
        if self.tls_required and not self.server_capabilities & CLIENT.SSL:
            raise _TlsNotOffered("the server does not offer TLS")
        await super()._request_authentication()


async def connect(endpoint: Endpoint, timeout: float) -> aiomysql.Connection:
    """An autocommit connection in the session settings above, values decoded by
    ``values.DECODERS``; ``DatasourceUnavailable`` when it cannot be opened."""
    context, required = tls_settings(endpoint)
    connection = _Connection(
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.user_name,
        password=wire_password(endpoint.password),
        db=endpoint.database_name or None,
        charset="utf8mb4",
        conv=DECODERS,
        connect_timeout=timeout,
        autocommit=True,
        ssl=context,
        init_command=SESSION_SQL,
        program_name="fetcher",
        local_infile=False,
    )
    connection.tls_required = required
    try:
        async with asyncio.timeout(timeout):
            await connection._connect()
    except Exception as error:
        connection.close()
        raise unavailable(error) from error
    except BaseException:
        connection.close()
        raise
    return connection


async def close(connection: aiomysql.Connection) -> None:
    """Says goodbye within 5 seconds, else drops the socket."""
    try:
        async with asyncio.timeout(5):
            await connection.ensure_closed()
    except Exception:
        connection.close()
    except BaseException:
        connection.close()
        raise
