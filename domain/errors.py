"""Domain errors. Each carries a stable ``FET-`` code, a title and a safe message.

``kind`` says what sort of rule was broken; the HTTP layer maps kinds (and a few codes) to
statuses in one table. Messages never contain secrets.
"""

from __future__ import annotations

from enum import Enum


class ErrorKind(Enum):
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNPROCESSABLE = "unprocessable"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


class FetcherError(Exception):
    """Base of every error with a stable code."""

    code = "FET-0002"
    title = "Internal Server Error"
    kind = ErrorKind.INTERNAL
    default_message = (
        "The server encountered an unexpected error. Please try again later or contact support."
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        title: str | None = None,
        fields: dict[str, str] | None = None,
    ) -> None:
        self.message = message if message is not None else self.default_message
        if code is not None:
            self.code = code
        if title is not None:
            self.title = title
        self.fields = fields
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class InvalidRequest(FetcherError):
    """The request breaks a validation rule (HTTP 400)."""

    code = "FET-0401"
    title = "Invalid Data Request"
    kind = ErrorKind.INVALID
    default_message = (
        "The request contains invalid data. Please check the request payload and try again."
    )


class MissingFields(InvalidRequest):
    code = "FET-0402"
    title = "Missing Fields in Request"
    default_message = (
        "Your request is missing one or more required fields. Please refer to the documentation "
        "to ensure all necessary fields are included in your request."
    )


class EntityNotFound(FetcherError):
    code = "FET-1001"
    title = "Entity Not Found"
    kind = ErrorKind.NOT_FOUND

    def __init__(self, entity: str) -> None:
        super().__init__(
            f"It was not possible to find the {entity} entity during the requested flow. "
            "Please review the data provided in the request."
        )


class Conflict(FetcherError):
    code = "FET-0004"
    title = "Conflict"
    kind = ErrorKind.CONFLICT


class InvalidTransition(FetcherError):
    """A command does not fit the job's current state (its invariants say no)."""

    code = "FET-0409"
    title = "Invalid Job Transition"
    kind = ErrorKind.CONFLICT


class ConcurrencyConflict(FetcherError):
    """Someone else appended to the same aggregate at the same version first."""

    code = "FET-0004"
    title = "Conflict"
    kind = ErrorKind.CONFLICT


class Unavailable(FetcherError):
    code = "FET-0003"
    title = "Service Unavailable"
    kind = ErrorKind.UNAVAILABLE
    default_message = (
        "The server is currently unable to handle the request due to temporary overloading or "
        "maintenance of the server. Please try again later."
    )


class ExtractionFailed(FetcherError):
    """A job could not be extracted. ``message`` is already safe to publish."""

    code = "FET-0060"
    title = "Extraction Failed"
    kind = ErrorKind.INTERNAL
