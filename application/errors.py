"""Errors raised by ports. Adapters wrap vendor exceptions in these (``raise ... from e``);
their messages are safe to show (no credentials, no connection strings)."""

from __future__ import annotations

from enum import Enum

from domain.errors import ErrorKind, FetcherError


class PortError(FetcherError):
    kind = ErrorKind.UNAVAILABLE
    code = "FET-0003"
    title = "Service Unavailable"


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


class DatasourceUnavailable(DatasourceError):
    pass


class DatasourceQueryFailed(DatasourceError):
    def __init__(self, message: str = "failed to query datasource") -> None:
        super().__init__(message, stage="query")


class InvalidSslMode(FetcherError):
    code = "FET-0413"
    title = "Invalid SSL Mode"
    kind = ErrorKind.INVALID

    def __init__(self, mode: str) -> None:
        super().__init__(
            f"Invalid SSL mode. The provided SSL mode '{mode}' is not supported. "
            "Please use a valid SSL mode for this database type."
        )


class ForbiddenHost(FetcherError):
    code = "FET-0414"
    title = "Forbidden Host"
    kind = ErrorKind.INVALID
    default_message = "Host is not a valid external database endpoint"


class StorageError(PortError):
    pass


class PublishFailed(PortError):
    pass


class InvalidSignature(PortError):
    code = "FET-0050"
    title = "Invalid Message"


class CredentialKeyMissing(PortError):
    def __init__(self, version: str) -> None:
        super().__init__(
            f"credentials are encrypted with key version '{version}', which is not configured"
        )
        self.version = version
