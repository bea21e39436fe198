"""A failed job's reason, said in words: the class of failure, the FET codes its text cites,
and what to do about them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain import error_catalogue as catalogue
from domain.error_catalogue import REMEDIES

_CATEGORY = re.compile(r"\[([a-z_]+)\]")
_CODE = re.compile(r"\bFET-\d{4}\b")
JOB_FAILED = catalogue.EXTRACTION_FAILED.code

CATEGORIES = {
    "validation": "The request does not fit the datasource: a table, field, filter or value "
    "it names is not there or does not convert.",
    "not_found": "A datasource the job names has no connection.",
    "precondition": "Something the job needs is missing, such as the key that sealed a "
    "connection's credentials.",
    "unavailable": "A datasource could not be reached, or failed while it was read.",
    "timeout": "The extraction ran past its deadline.",
    "limit_exceeded": "The result grew past the size limit.",
    "too_large": "The result grew past the size limit.",
    "storage": "The result could not be written to object storage.",
    "internal": "Fetcher failed on its own; its logs say more.",
}


@dataclass(frozen=True, slots=True)
class FailureExplanation:
    summary: str
    codes: tuple[tuple[str, str], ...]
    """Each FET code the failure cites (FET-1023 when it cites none), with what to do."""
    text: str
    """The failure as recorded (``metadata.error.message``)."""


def explain_failure(text: str) -> FailureExplanation:
    category = _CATEGORY.search(text)
    summary = CATEGORIES.get(category.group(1), "") if category else ""
    lowered = text.lower()
    if not summary and "not picked up" in lowered:
        summary = "No worker claimed the job in time."
    if not summary and "abandoned" in lowered:
        summary = "Its workers stopped holding the job after the last allowed claim."
    if not summary:
        summary = "The job failed; the recorded reason follows."
    codes = list(dict.fromkeys(_CODE.findall(text))) or [JOB_FAILED]
    return FailureExplanation(
        summary, tuple((code, REMEDIES.get(code, "")) for code in codes), text
    )
