"""Errors raised by ports. Adapters wrap vendor exceptions in these (``raise ... from e``);
their messages are safe to show (no credentials, no connection strings)."""

from __future__ import annotations

from domain import error_catalogue as catalogue
from domain.errors import FetcherError


class PortError(FetcherError):
    entry = catalogue.SERVICE_UNAVAILABLE


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
