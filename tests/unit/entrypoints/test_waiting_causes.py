"""What a role says while it waits for a dependency: the cause, in words that name the fix."""

from __future__ import annotations

from application.errors import StorageError, StorageRejected
from entrypoints.composition.readiness import cause_of


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as error:
            raise outer from error
    except BaseException as raised:
        return raised


def test_a_missing_bucket_is_said_as_a_missing_bucket_not_as_the_status_under_it():
    refused = StorageRejected("bucket not found: 'results' does not exist; create it")
    error = _chained(refused, OSError("An error occurred (404) when calling HeadBucket"))
    assert cause_of(error) == "bucket not found: 'results' does not exist; create it"


def test_an_outage_is_said_by_its_innermost_cause():
    error = _chained(StorageError("s3 storage unreachable"), ConnectionRefusedError("refused"))
    assert cause_of(error) == "refused"
