"""Why a connection failed, read from a driver's exception chain when an engine wraps it.

The standard library's errors mean the same for every driver (TLS, name resolution, refusal,
timeout); each engine adds what only its driver says (PostgreSQL's SQLSTATE, MySQL's error
numbers) as ``DriverReason``. The first error of the chain that says anything decides.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator

from application.errors import ConnectFailure, DatasourceUnavailable

DriverReason = Callable[[BaseException], ConnectFailure | None]


def _no_driver_reason(error: BaseException) -> ConnectFailure | None:
    return None


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        yield current
        current = current.__cause__ or current.__context__


def _standard_reason(error: BaseException) -> ConnectFailure | None:
    if isinstance(error, ssl.SSLCertVerificationError):
        return ConnectFailure.CERTIFICATE_NOT_VERIFIED
    if isinstance(error, ssl.SSLError):
        return ConnectFailure.TLS_HANDSHAKE_FAILED
    if isinstance(error, socket.gaierror):
        return ConnectFailure.HOST_NOT_RESOLVED
    if isinstance(error, ConnectionRefusedError):
        return ConnectFailure.REFUSED
    if isinstance(error, TimeoutError):
        return ConnectFailure.TIMED_OUT
    return None


def connect_failure(
    error: BaseException, driver: DriverReason = _no_driver_reason
) -> ConnectFailure | None:
    """The reason ``error`` (or an error it was raised from) gives, else ``None``."""
    for cause in _chain(error):
        reason = _standard_reason(cause) or driver(cause)
        if reason is not None:
            return reason
    return None


def unavailable(
    error: BaseException, driver: DriverReason = _no_driver_reason
) -> DatasourceUnavailable:
    """The error of a connection that could not be opened because of ``error`` (raise it
    ``from error``)."""
    return DatasourceUnavailable(
        "failed to connect to datasource", reason=connect_failure(error, driver)
    )
