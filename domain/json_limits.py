"""Limits on free-form JSON values a request may carry (job ``metadata``, filter values).

The request hash encodes them with Go's float64 rules and recursive encoders, so a value nested
deeper than :data:`MAX_DEPTH` or a number no float64 can hold is refused up front with a clear
reason instead of failing later. The walk is iterative: it never recurses on client input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 64


def number_problem(value: Any) -> str | None:
    """Why a scalar cannot be a float64 JSON number, or None when it can (or is no number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return "a number outside the 64-bit floating-point range"
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"
    return None


def json_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` breaks the limits (a phrase to follow its name), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if depth > max_depth:
                return f"is nested more than {max_depth} levels deep"
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
            continue
        problem = number_problem(item)
        if problem is not None:
            return f"contains {problem}"
    return None


def has_nul(value: Any) -> bool:
    """Whether any text in ``value`` (keys included) holds a NUL character, which PostgreSQL
    cannot store in text or JSONB and no database driver passes on."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
