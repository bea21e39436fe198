"""Errors of the application layer: those raised by ports (adapters wrap vendor exceptions in
these, ``raise ... from e``), authentication and authorisation, and the connection use cases.
Their messages are safe to show (no credentials, no connection strings)."""

from __future__ import annotations

from enum import Enum

from domain import error_catalogue as catalogue
from domain.errors import FetcherError


class PortError(FetcherError):
    entry = catalogue.SERVICE_UNAVAILABLE


class ConnectFailure(Enum):
    """Why a datasource connection failed, as the adapter that wrapped the driver's error
    recognised it. Each value is a short, secret-free text for users."""

    CERTIFICATE_NOT_VERIFIED = "the server certificate could not be verified"
    TLS_HANDSHAKE_FAILED = "the TLS handshake failed"
    HOST_NOT_RESOLVED = "the host name could not be resolved"
    REFUSED = "the connection was refused"
    TIMED_OUT = "the connection timed out"
    AUTHENTICATION_FAILED = "authentication failed"
    DATABASE_NOT_FOUND = "the database does not exist"


class DatasourceError(PortError):
    """A datasource could not be used. ``stage`` is connect, discover or query; ``reason`` says
    why a connection failed when the adapter recognised the cause (else ``None``)."""

    def __init__(
        self, message: str, *, stage: str = "connect", reason: ConnectFailure | None = None
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.reason = reason


def connect_failure(error: BaseException) -> ConnectFailure | None:
    """Why a connection failed, as the adapter that wrapped the driver's error recognised it;
    a timeout (the caller's own, around a test) is one."""
    reason = error.reason if isinstance(error, DatasourceError) else None
    if reason is None and isinstance(error, TimeoutError):
        return ConnectFailure.TIMED_OUT
    return reason


class DatasourceUnavailable(DatasourceError):
    pass


class DatasourceQueryFailed(DatasourceError):
    def __init__(self, message: str = "failed to query datasource") -> None:
        super().__init__(message, stage="query")


class DatasourceDataError(DatasourceError):
    """The datasource answered, but what it holds cannot be read as asked (collections the
    request names are gone, a field that does not decrypt). ``message`` names what, never a
    value or a key; the job fails with it under ``category``."""

    def __init__(self, message: str, *, category: str = "validation") -> None:
        super().__init__(message, stage="query")
        self.category = category


class InvalidSslMode(FetcherError):
    entry = catalogue.INVALID_SSL_MODE

    def __init__(self, mode: str) -> None:
        super().__init__(self.entry.render(mode=mode))


class ForbiddenHost(FetcherError):
    entry = catalogue.FORBIDDEN_HOST


class StorageError(PortError):
    pass


class StorageRejected(StorageError):
    """The storage answered and refused (no such bucket, access denied): trying again
    within an outage window would not help."""


class PublishFailed(PortError):
    pass


class MessageUnroutable(PublishFailed):
    """The broker returned the message: no queue is bound for its routing key (the
    publisher has said what to bind; publishing it again succeeds once one is)."""


class InvalidSignature(PortError):
    entry = catalogue.INVALID_MESSAGE


class CredentialKeyMissing(PortError):
    def __init__(self, version: str) -> None:
        super().__init__(
            f"credentials are encrypted with key version '{version}', which is not configured"
        )
        self.version = version


class Unauthenticated(FetcherError):
    """No bearer token, or one that does not check out (HTTP 401). ``token_given`` tells which:
    the answer then says ``error="invalid_token"``. ``reason`` never quotes the token."""

    entry = catalogue.MISSING_TOKEN

    def __init__(self, reason: str | None = None) -> None:
        if reason is None:
            super().__init__()
        else:
            invalid = catalogue.INVALID_TOKEN
            super().__init__(invalid.render(reason=reason), entry=invalid)
        self.token_given = reason is not None


class PermissionDenied(FetcherError):
    """A caller whose token checked out, without the permission a route requires (HTTP 403).
    Without ``permission``, the authorization service said no."""

    entry = catalogue.PERMISSION_DENIED

    def __init__(self, permission: str | None = None) -> None:
        if permission is None:
            super().__init__(entry=catalogue.DENIED_BY_AUTH_SERVICE)
        else:
            super().__init__(self.entry.render(permission=permission))
        self.permission = permission


class AuthServiceUnavailable(PortError):
    """The authorization service, or the token issuer's keys, could not be reached."""

    entry = catalogue.AUTH_SERVICE_UNAVAILABLE


class AuthServiceRefused(FetcherError):
    """The authorization service answered with an error of its own. The HTTP layer relays
    ``status``; ``code``, ``title`` and ``message`` are the service's own when its body is in
    the one error shape, else those of FET-0009."""

    entry = catalogue.AUTH_SERVICE_ERROR

    def __init__(
        self,
        status: int,
        *,
        code: str | None = None,
        title: str | None = None,
        message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        if code and title and message:
            self.code, self.title = code, title


class ConnectionInUse(FetcherError):
    """A pending or processing job reads the connection, so it cannot change now."""

    entry = catalogue.JOB_IN_PROGRESS


class ConnectionTestFailed(FetcherError):
    """The datasource could not be reached (reference: 500 "Database Connection Error")."""

    entry = catalogue.CONNECTION_TEST_FAILED

    @classmethod
    def caused_by(cls, error: BaseException) -> ConnectionTestFailed:
        """The error for a failed test, with the cause the adapter recognised (a timeout of the
        test itself is one) appended to the reference's text."""
        reason = connect_failure(error)
        return cls(f"{cls.default_message} Cause: {reason.value}." if reason else None)


class SchemaRetrievalFailed(FetcherError):
    entry = catalogue.SCHEMA_RETRIEVAL_FAILED
