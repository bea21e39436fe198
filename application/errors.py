"""Errors raised by ports. Adapters wrap vendor exceptions in these (``raise ... from e``);
their messages are safe to show (no credentials, no connection strings)."""

from __future__ import annotations

from domain.errors import ErrorKind, FetcherError


class PortError(FetcherError):
    kind = ErrorKind.UNAVAILABLE
    code = "FET-0003"
    title = "Service Unavailable"


class DatasourceError(PortError):
    """A datasource could not be used. ``stage`` is connect, discover or query."""

    def __init__(self, message: str, *, stage: str = "connect") -> None:
        super().__init__(message)
        self.stage = stage


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
