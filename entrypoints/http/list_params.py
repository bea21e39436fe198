"""Query parameters of the connection lists (reference §2.3)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from datetime import date

from application.connections.queries.list_connections import ListFilter
from domain import error_catalogue as catalogue
from domain.errors import InvalidRequest

MAX_KEY_LENGTH = 64
MAX_VALUE_LENGTH = 256
MAX_PAGE = 10**9
"""With ``limit`` at most a few hundred, the row offset ``(page - 1) * limit`` fits 64 bits."""
MAX_METADATA_FILTERS = 20
"""Distinct ``metadata.<key>`` filters in one list query: each is a JSON condition that the
database evaluates per row and SQLAlchemy compiles on the event loop."""
MAX_QUERY_PARAMETERS = 50
"""Query parameters in one list query, all names counted, empty and ignored ones too."""


def invalid_parameter(name: str) -> InvalidRequest:
    entry = catalogue.INVALID_QUERY_PARAMETER
    return InvalidRequest(entry.render(name=name), entry=entry)


def _positive(params: dict[str, str], name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    digits = raw[1:] if raw[:1] in "+-" else raw
    # ASCII digits only: int() would also take "1_0", " 5" or other scripts' digits
    if not (digits.isascii() and digits.isdigit()):
        raise invalid_parameter(name)
    value = int(raw)
    if value < 1:
        raise invalid_parameter(name)
    return value


def _check_cursor(raw: str) -> None:
    try:
        decoded = json.loads(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError):
        raise invalid_parameter("cursor") from None
    if not (
        isinstance(decoded, dict)
        and isinstance(decoded.get("id"), str)
        and isinstance(decoded.get("points_next"), bool)
    ):
        raise invalid_parameter("cursor")


def _date(raw: str | None) -> date | None:
    if raw is None:
        return None
    try:
        if len(raw) != 10:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(entry=catalogue.INVALID_DATE_FORMAT) from None


def parse_list_filter(
    items: Iterable[tuple[str, str]], *, product: str | None, max_limit: int
) -> ListFilter:
    """Empty values are ignored; keys starting with ``$`` or ``_``, keys over 64 characters,
    values over 256, NUL characters (no database column holds them), a ``page`` over
    :data:`MAX_PAGE`, more than :data:`MAX_METADATA_FILTERS` metadata filters and more than
    :data:`MAX_QUERY_PARAMETERS` parameters are refused (FET-0405); ``limit`` over
    ``max_limit`` is FET-0406, a bad ``sortOrder`` FET-0407, a bad date FET-0408. ``cursor``
    is checked, then ignored."""
    given = list(items)
    if len(given) > MAX_QUERY_PARAMETERS:
        raise invalid_parameter(f"query string (at most {MAX_QUERY_PARAMETERS} parameters)")
    params: dict[str, str] = {}
    metadata: dict[str, str] = {}
    for key, value in given:
        if value == "":
            continue
        if (
            key.startswith(("$", "_"))
            or len(key) > MAX_KEY_LENGTH
            or len(value) > MAX_VALUE_LENGTH
            or "\x00" in key
            or "\x00" in value
        ):
            raise invalid_parameter(key)
        if key.startswith("metadata.") and len(key) > len("metadata."):
            metadata[key.removeprefix("metadata.")] = value
            if len(metadata) > MAX_METADATA_FILTERS:
                raise invalid_parameter(f"metadata.<key> (at most {MAX_METADATA_FILTERS} filters)")
        params.setdefault(key, value)
    limit = _positive(params, "limit", 10)
    if limit > max_limit:
        entry = catalogue.PAGINATION_LIMIT_EXCEEDED
        raise InvalidRequest(entry.render(limit=max_limit), entry=entry)
    page = _positive(params, "page", 1)
    if page > MAX_PAGE:
        raise invalid_parameter("page")
    order = params.get("sortOrder", "desc").lower()
    if order not in ("asc", "desc"):
        raise InvalidRequest(entry=catalogue.INVALID_SORT_ORDER)
    if "cursor" in params:
        _check_cursor(params["cursor"])
    kind = params.get("type")
    return ListFilter(
        page=page,
        limit=limit,
        descending=order == "desc",
        product_name=product,
        type=kind.upper() if kind else None,
        start_date=_date(params.get("startDate")),
        end_date=_date(params.get("endDate")),
        metadata=metadata,
    )
