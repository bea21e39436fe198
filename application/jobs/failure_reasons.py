"""Which ``FailureReason`` a worker's failure belongs to."""

from __future__ import annotations

from application.errors import DatasourceError, StorageError
from application.jobs.extraction_plan import ExtractionError
from application.ports.metrics import FailureReason

_CATEGORIES = {reason.value: reason for reason in FailureReason}


def failure_reason(error: BaseException) -> FailureReason:
    """The reason class of an error that failed a job: an extraction error's category when it
    is one of the classes, storage and datasource errors by kind, anything else ``internal``."""
    if isinstance(error, ExtractionError):
        return _CATEGORIES.get(error.category, FailureReason.INTERNAL)
    if isinstance(error, StorageError):
        return FailureReason.STORAGE
    if isinstance(error, DatasourceError):
        return FailureReason.UNAVAILABLE
    return FailureReason.INTERNAL
