"""Errors raised by ports. Adapters wrap vendor exceptions in these (``raise ... from e``);
their messages are safe to show (no credentials, no connection strings)."""

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


class DatasourceUnavailable(DatasourceError):
    pass


class DatasourceQueryFailed(DatasourceError):
    def __init__(self, message: str = "failed to query datasource") -> None:
        super().__init__(message, stage="query")


class InvalidSslMode(FetcherError):
    entry = catalogue.INVALID_SSL_MODE

    def __init__(self, mode: str) -> None:
        super().__init__(self.entry.render(mode=mode))


class ForbiddenHost(FetcherError):
    entry = catalogue.FORBIDDEN_HOST


class StorageError(PortError):
    pass


class PublishFailed(PortError):
    pass


class InvalidSignature(PortError):
    entry = catalogue.INVALID_MESSAGE


class CredentialKeyMissing(PortError):
    def __init__(self, version: str) -> None:
        super().__init__(
            f"credentials are encrypted with key version '{version}', which is not configured"
        )
        self.version = version
