from __future__ import annotations

from datetime import UTC, datetime


def rfc3339nano(moment: datetime) -> str:
    """Go's ``time.RFC3339Nano`` of the UTC instant: ``2026-01-02T03:04:05.12Z`` (a naive
    ``moment`` is taken to be UTC)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += ("." + f"{utc.microsecond:06d}").rstrip("0")
    return text + "Z"
