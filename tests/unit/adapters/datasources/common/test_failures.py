"""Why a connection failed: classified by the engine adapters from the driver's exception chain,
shown by the connection test as a short cause."""

from __future__ import annotations

import socket
import ssl

import asyncpg
import pymysql
import pytest

from adapters.datasources.common.failures import connect_failure
from adapters.datasources.mysql.connection import unavailable as mysql_unavailable
from adapters.datasources.postgres.connection import unavailable as postgres_unavailable
from application.errors import (
    ConnectFailure,
    ConnectionTestFailed,
    DatasourceQueryFailed,
    DatasourceUnavailable,
)

CONNECT_FAILED = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)


def _raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    """``outer`` as ``raise outer from cause`` leaves it."""
    try:
        raise outer from cause
    except BaseException as error:
        return error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ssl.SSLCertVerificationError(1, "certificate verify failed"),
         ConnectFailure.CERTIFICATE_NOT_VERIFIED),
        (ssl.SSLError(1, "wrong version number"), ConnectFailure.TLS_HANDSHAKE_FAILED),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
         ConnectFailure.HOST_NOT_RESOLVED),
        (ConnectionRefusedError(111, "Connection refused"), ConnectFailure.REFUSED),
        (TimeoutError(), ConnectFailure.TIMED_OUT),
        (OSError("no route"), None),
        (ValueError("anything else"), None),
    ],
)  # fmt: skip
def test_the_standard_librarys_errors_are_recognised_on_every_engine(
    error: BaseException, reason: ConnectFailure | None
) -> None:
    assert connect_failure(error) is reason
    assert connect_failure(_raised_from(RuntimeError("driver wrapper"), error)) is reason


def test_the_outermost_recognised_error_of_the_chain_decides() -> None:
    inner = ssl.SSLCertVerificationError(1, "certificate verify failed")
    outer = _raised_from(TimeoutError(), inner)
    assert connect_failure(outer) is ConnectFailure.TIMED_OUT


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (asyncpg.InvalidPasswordError("password authentication failed"),
         ConnectFailure.AUTHENTICATION_FAILED),
        (asyncpg.InvalidAuthorizationSpecificationError("no pg_hba.conf entry"),
         ConnectFailure.AUTHENTICATION_FAILED),
        (asyncpg.InvalidCatalogNameError('database "nope" does not exist'),
         ConnectFailure.DATABASE_NOT_FOUND),
        (asyncpg.TooManyConnectionsError("too many clients"), None),
    ],
)  # fmt: skip
def test_postgres_reads_the_sqlstate(error: BaseException, reason: ConnectFailure | None) -> None:
    wrapped = postgres_unavailable(error)
    assert isinstance(wrapped, DatasourceUnavailable) and wrapped.stage == "connect"
    assert wrapped.reason is reason
    assert str(wrapped) == "failed to connect to datasource"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pymysql.err.OperationalError(1045, "Access denied for user"),
         ConnectFailure.AUTHENTICATION_FAILED),
        (pymysql.err.OperationalError(1044, "Access denied to database"),
         ConnectFailure.AUTHENTICATION_FAILED),
        (pymysql.err.OperationalError(1698, "Access denied"), ConnectFailure.AUTHENTICATION_FAILED),
        (pymysql.err.InternalError(1049, "Unknown database 'nope'"),
         ConnectFailure.DATABASE_NOT_FOUND),
        (pymysql.err.OperationalError(1040, "Too many connections"), None),
        (pymysql.err.OperationalError("not a number"), None),
        (_raised_from(
            pymysql.err.OperationalError(2003, "Can't connect to MySQL server"),
            ssl.SSLCertVerificationError(1, "certificate verify failed"),
         ), ConnectFailure.CERTIFICATE_NOT_VERIFIED),
    ],
)  # fmt: skip
def test_mysql_reads_the_server_error_number(
    error: BaseException, reason: ConnectFailure | None
) -> None:
    assert mysql_unavailable(error).reason is reason


def test_postgres_sqlstates_mean_nothing_to_other_engines() -> None:
    assert connect_failure(asyncpg.InvalidPasswordError("password authentication failed")) is None
    assert mysql_unavailable(asyncpg.InvalidCatalogNameError("no such database")).reason is None


@pytest.mark.parametrize("reason", list(ConnectFailure))
def test_the_connection_test_shows_the_recognised_cause(reason: ConnectFailure) -> None:
    error = ConnectionTestFailed.caused_by(
        DatasourceUnavailable("failed to connect to datasource", reason=reason)
    )
    assert error.message == f"{CONNECT_FAILED} Cause: {reason.value}."


def test_the_cause_texts_are_the_ones_users_know() -> None:
    assert {reason.name: reason.value for reason in ConnectFailure} == {
        "CERTIFICATE_NOT_VERIFIED": "the server certificate could not be verified",
        "TLS_HANDSHAKE_FAILED": "the TLS handshake failed",
        "HOST_NOT_RESOLVED": "the host name could not be resolved",
        "REFUSED": "the connection was refused",
        "TIMED_OUT": "the connection timed out",
        "AUTHENTICATION_FAILED": "authentication failed",
        "DATABASE_NOT_FOUND": "the database does not exist",
    }


def test_a_test_that_timed_out_says_so_and_an_unknown_failure_adds_nothing() -> None:
    assert ConnectionTestFailed.caused_by(TimeoutError()).message == (
        f"{CONNECT_FAILED} Cause: the connection timed out."
    )
    unknown = DatasourceUnavailable("failed to connect to datasource")
    unknown.__cause__ = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert ConnectionTestFailed.caused_by(unknown).message == CONNECT_FAILED
    assert ConnectionTestFailed.caused_by(DatasourceQueryFailed()).message == CONNECT_FAILED
