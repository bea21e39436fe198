"""Domain errors. Each takes its stable ``FET-`` code, title, kind and default message from one
entry of ``domain.error_catalogue``; the HTTP layer maps kinds to statuses in one table.
Messages never contain secrets.
"""

from __future__ import annotations

from typing import Any

from domain import error_catalogue as catalogue
from domain.error_catalogue import CatalogueEntry, ErrorKind


class FetcherError(Exception):
    """Base of every error with a stable code.

    A subclass names its catalogue ``entry``; ``code``, ``title``, ``kind`` and
    ``default_message`` follow from it. One instance may carry another entry of the same kind
    (a title variant of the reference, such as FET-0402 ``Missing Required Field``).
    ``entity_type`` names the entity whose own rules were broken (the reference's
    ``entityType``, set by its model-level validation only).
    """

    entry: CatalogueEntry = catalogue.INTERNAL_ERROR
    code: str = entry.code
    title: str = entry.title
    kind: ErrorKind = entry.kind
    default_message: str = entry.message

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "entry" in vars(cls):
            cls.code, cls.title, cls.kind = cls.entry.code, cls.entry.title, cls.entry.kind
            if "default_message" not in vars(cls):
                cls.default_message = cls.entry.message

    def __init__(
        self,
        message: str | None = None,
        *,
        entry: CatalogueEntry | None = None,
        fields: dict[str, str] | None = None,
        entity_type: str | None = None,
    ) -> None:
        default = self.default_message
        if entry is not None:
            self.entry = entry
            self.code, self.title, self.kind = entry.code, entry.title, entry.kind
            default = entry.message
        self.message = message if message is not None else default
        self.fields = fields
        self.entity_type = entity_type
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class InvalidRequest(FetcherError):
    """The request breaks a validation rule (HTTP 400)."""

    entry = catalogue.INVALID_DATA_REQUEST


class MissingFields(InvalidRequest):
    entry = catalogue.MISSING_FIELDS


class InvalidFields(InvalidRequest):
    """Fields in the wrong format, each with its reason (FET-0001 with ``fields``)."""

    entry = catalogue.INVALID_FIELDS

    def __init__(
        self, fields: dict[str, str], message: str | None = None, *, entity_type: str | None = None
    ) -> None:
        super().__init__(message, fields=fields, entity_type=entity_type)


class EntityNotFound(FetcherError):
    entry = catalogue.ENTITY_NOT_FOUND

    def __init__(self, entity: str) -> None:
        super().__init__(self.entry.render(entity=entity))


class Conflict(FetcherError):
    entry = catalogue.CONFLICT


class EntityConflict(Conflict):
    """Another live entity already has the same unique attributes (a connection's name)."""

    entry = catalogue.ENTITY_CONFLICT

    def __init__(self, entity: str, *, field: str | None = None, value: str | None = None) -> None:
        """``field`` (as the API names it) and ``value`` say which attribute is taken."""
        message = self.entry.render(entity=entity)
        fields = None
        if field is not None:
            taken = f"'{value}' is already used by another {entity}"
            message = f"{message} {field} {taken}."
            fields = {field: taken}
        super().__init__(message, fields=fields)


class InvalidTransition(FetcherError):
    """A command does not fit the job's current state (its invariants say no)."""

    entry = catalogue.INVALID_JOB_TRANSITION


class ConcurrencyConflict(FetcherError):
    """Someone else appended to the same aggregate at the same version first."""

    entry = catalogue.CONFLICT


class Unavailable(FetcherError):
    entry = catalogue.SERVICE_UNAVAILABLE


class ExtractionFailed(FetcherError):
    """A job could not be extracted. ``message`` is already safe to publish."""

    entry = catalogue.EXTRACTION_FAILED


class CrmKeyMissing(FetcherError):
    """A job on ``plugin_crm`` needs a key of the CRM plugin that is not configured; the
    message names the setting."""

    entry = catalogue.CRM_HASH_KEY_MISSING
