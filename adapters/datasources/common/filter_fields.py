"""What the SQL engines' filters (``sql_filters``) and MongoDB's (``mongodb.statements``) share:
the ten operators of reference §4.2 in their order, and the checks a field's values pass before
an engine gives them its meaning.

``FilterField`` is one filtered field: ``values`` (``null`` only among ``eq``/``in``/``ne``/
``nin`` values), ``single`` (the comparisons' one value), ``bounds`` (``between``'s two, a
date-only upper bound on a field of date-times meaning the end of that day) and ``pattern``
(``like``'s one string, never ending with a lone escape). Each engine's field converts a value
by its own types (``convert``); a value that does not fit raises ``InvalidRequest``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from adapters.datasources.common.sql_values import DATE_RE
from domain.errors import InvalidRequest

LIKE_ESCAPE = "\\"
ORDER: tuple[str, ...] = ("eq", "gt", "gte", "lt", "lte", "between", "in", "nin", "ne", "like")
NULL_OPS = frozenset({"eq", "in", "ne", "nin"})


def place(result_key: str, field: str, database: str) -> str:
    """A filtered field as error messages name it: ``'orders.total' of database 'crm'``."""
    return f"'{result_key}.{field}' of database '{database}'"


def known_operators(condition: Mapping[str, Any], where: str) -> None:
    """Raises ``InvalidRequest`` for the first operator of ``condition`` not in ``ORDER``."""
    unknown = [op for op in condition if op not in ORDER]
    if unknown:
        raise InvalidRequest(
            f"filter on {where}: unknown operator '{unknown[0]}' "
            f"(expected one of {', '.join(ORDER)})"
        )


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 80 else text[:77] + "..."


def _ends_with_escape(pattern: str) -> bool:
    trailing = len(pattern) - len(pattern.rstrip(LIKE_ESCAPE))
    return trailing % 2 == 1


class FilterField(ABC):
    """One filtered field: ``where`` names it in error messages, ``type_name`` is its type as
    the messages show it (a ``subject``'s: column or field), ``day_end`` what a date-only upper
    bound of ``between`` adds (``None``: the field holds no date-times)."""

    subject = "column"

    def __init__(self, where: str, type_name: str, day_end: timedelta | None = None) -> None:
        self.where = where
        self.type_name = type_name
        self.day_end = day_end

    @abstractmethod
    def convert(self, op: str, value: Any) -> Any:
        """The engine's value for one JSON value of ``op``; raises ``InvalidRequest``."""

    def error(self, op: str, message: str) -> InvalidRequest:
        return InvalidRequest(f"filter on {self.where}: operator '{op}' {message}")

    def mismatch(self, op: str, expected: str, value: Any) -> InvalidRequest:
        """The error of a value that does not fit the field's type."""
        return self.error(
            op,
            f"expects {expected} for {self.subject} type '{self.type_name}', got {_shown(value)}",
        )

    def values(self, op: str, raw: Sequence[Any]) -> tuple[bool, list[Any]]:
        """(whether null was among the values, the other values converted)."""
        has_null = any(v is None for v in raw)
        if has_null and op not in NULL_OPS:
            raise self.error(op, "does not accept null (only eq, ne, in and nin do)")
        return has_null, [self.convert(op, v) for v in raw if v is not None]

    def single(self, op: str, raw: Sequence[Any]) -> Any:
        """The one value of a comparison, converted."""
        if len(raw) != 1:
            raise self.error(op, f"must have exactly 1 value, got {len(raw)}")
        return self.values(op, raw)[1][0]

    def bounds(self, raw: Sequence[Any]) -> tuple[Any, Any]:
        """``between``'s low and high values, converted (inclusive)."""
        if len(raw) != 2:
            raise self.error("between", f"must have exactly 2 values, got {len(raw)}")
        _, (low, high) = self.values("between", raw)
        if self.day_end is not None and isinstance(raw[1], str) and DATE_RE.fullmatch(raw[1]):
            high = high + self.day_end
        return low, high

    def pattern(self, raw: Sequence[Any]) -> str:
        """``like``'s pattern, as it is."""
        if len(raw) != 1 or not isinstance(raw[0], str):
            raise self.error("like", "takes exactly 1 string pattern")
        if _ends_with_escape(raw[0]):
            raise self.error(
                "like", f"pattern must not end with the escape character '{LIKE_ESCAPE}'"
            )
        return raw[0]
