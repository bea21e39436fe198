"""MongoDB queries: what one read finds (``find_query``), with the ten filter operators of reference
§4.2 as one query document (``mongo_filter``).

The requested fields are projected (``_id`` only when asked for); when every discovered field is
asked for (the ``["*"]`` wildcard) documents come whole, with the fields the sample missed.

The filters' meaning is the SQL engines' (``common.sql_filters``), not the reference's MongoDB
quirks: every operator of a field applies (several operators on one field are AND-ed, and
two that would write the same key, such as ``between`` and ``gte``, go into ``$and`` instead of
overwriting each other); ``eq`` with several values and ``in`` both apply; ``ne`` and ``nin`` never
match a null or missing field (SQL's ``<>`` and ``NOT IN`` never match NULL), ``eq``/``in`` with
``null`` match null or missing; ``like`` is an anchored, escaped, case-sensitive regular
expression (``%`` any run of characters, ``_`` one character, ``\\`` escapes the next character,
newlines included), so ``.`` or ``(`` in a pattern are plain characters.

Values are converted by the field's sampled BSON type (``values``).

``like`` on a string field (or one of unknown type) is ``$regex``; on a field of another known
type the value is compared as text (``$expr`` with ``$toString`` and ``$regexMatch``), as the SQL
engines cast such columns to text. A value that does not convert raises ``InvalidRequest``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from adapters.datasources.common.filter_fields import ORDER, FilterField, known_operators, place
from adapters.datasources.mongodb.values import CONVERTERS, EXPECTED, Unconvertible
from domain.connection import Endpoint
from domain.schema import TableRead

_COMPARISONS = {"gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}
_TEXT_TYPES = frozenset({"string", "mixed", "null", "regex", "symbol"})

_END_OF_DAY = timedelta(days=1, milliseconds=-1)  # BSON dates hold milliseconds


def like_regex(pattern: str) -> str:
    """A SQL LIKE pattern as an anchored regular expression of the same meaning (``%`` any run
    of characters, ``_`` one character, ``\\`` escapes the next one; everything else literal).
    The end anchor is a look-ahead so that a trailing newline is not ignored as ``$`` would."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            parts.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return "^" + "".join(parts) + r"(?![\s\S])"


class _Field(FilterField):
    subject = "field"

    def __init__(self, name: str, bson_type: str, where: str) -> None:
        super().__init__(where, bson_type, _END_OF_DAY if bson_type == "date" else None)
        self.name = name
        self.bson_type = bson_type
        self._convert = CONVERTERS.get(bson_type)

    def convert(self, op: str, value: Any) -> Any:
        if self._convert is None:
            return value
        try:
            return self._convert(value)
        except (Unconvertible, ValueError, OverflowError):
            raise self.mismatch(op, EXPECTED[self.bson_type], value) from None


def _members(f: _Field, op: str, raw: Sequence[Any]) -> dict[str, Any]:
    has_null, values = f.values(op, raw)
    if has_null:
        values.append(None)
    if op == "eq" and len(values) == 1:
        return {"$eq": values[0]}
    return {"$in": values}


def _non_members(f: _Field, op: str, raw: Sequence[Any]) -> dict[str, Any]:
    _, values = f.values(op, raw)
    return {"$nin": [*values, None]}


def _between(f: _Field, raw: Sequence[Any]) -> dict[str, Any]:
    low, high = f.bounds(raw)
    return {"$gte": low, "$lte": high}


def _like(f: _Field, raw: Sequence[Any]) -> tuple[bool, dict[str, Any]]:
    """(whether the condition is a whole ``$expr`` rather than one field's, the condition)"""
    regex = like_regex(f.pattern(raw))
    if f.bson_type in _TEXT_TYPES or f.bson_type not in EXPECTED:
        return False, {"$regex": regex, "$options": "s"}
    as_text = {"$toString": "$" + f.name}
    return True, {"$expr": {"$regexMatch": {"input": as_text, "regex": regex, "options": "s"}}}


def field_conditions(
    name: str, bson_type: str, condition: Mapping[str, Sequence[Any]], *, where: str
) -> list[tuple[str | None, dict[str, Any]]]:
    """``(field, operator document)`` pairs for one field, in the reference's order; the field
    is ``None`` for a condition that is a whole query document (``$expr``)."""
    known_operators(condition, where)
    f = _Field(name, bson_type, where)
    found: list[tuple[str | None, dict[str, Any]]] = []
    for op in ORDER:
        raw = condition.get(op)
        if not raw:
            continue
        if op in ("eq", "in"):
            found.append((name, _members(f, op, raw)))
        elif op in ("ne", "nin"):
            found.append((name, _non_members(f, op, raw)))
        elif op in _COMPARISONS:
            found.append((name, {_COMPARISONS[op]: f.single(op, raw)}))
        elif op == "between":
            found.append((name, _between(f, raw)))
        else:
            whole, document = _like(f, raw)
            found.append((None, document) if whole else (name, document))
    return found


def merge(conditions: Sequence[tuple[str | None, dict[str, Any]]]) -> dict[str, Any]:
    """One query document: operators of one field share its document while their keys differ;
    a condition that would overwrite a key (or is a whole document) is AND-ed in ``$and``."""
    query: dict[str, Any] = {}
    extra: list[dict[str, Any]] = []
    for name, document in conditions:
        if name is None:
            extra.append(document)
            continue
        current = query.get(name)
        if current is None:
            query[name] = dict(document)
        elif current.keys().isdisjoint(document):
            current.update(document)
        else:
            extra.append({name: document})
    if extra:
        query["$and"] = extra
    return query


def mongo_filter(
    filters: Mapping[str, Mapping[str, Sequence[Any]]],
    field_types: Mapping[str, str],
    *,
    where: Callable[[str], str],
) -> dict[str, Any]:
    """The query document for ``{field: {op: values}}``; ``field_types`` gives each field's
    sampled BSON type and ``where(field)`` names it in error messages."""
    conditions: list[tuple[str | None, dict[str, Any]]] = []
    for name, condition in filters.items():
        conditions.extend(
            field_conditions(name, field_types.get(name, "mixed"), condition, where=where(name))
        )
    return merge(conditions)


@dataclass(frozen=True, slots=True)
class Query:
    """One collection's read: the filter and projection of a ``find``, the fields every row
    has, and whether documents come whole."""

    result_key: str
    collection: str
    names: tuple[str, ...]
    whole: bool
    filter: dict[str, Any]
    projection: dict[str, int] | None


def requested_fields(read: TableRead) -> tuple[tuple[str, ...], bool, dict[str, str]]:
    """The fields ``read`` asks for (sorted; none: nothing to read), whether they are every
    discovered field (documents come whole), and each discovered field's sampled type."""
    names = tuple(sorted({c.name for c in read.columns}))
    whole = {c.name for c in read.table.columns} <= set(names)
    types = {c.name: c.data_type for c in read.table.columns}
    return names, whole, types


def find_query(endpoint: Endpoint, read: TableRead) -> Query | None:
    """The query reading one collection, or ``None`` when no field is asked for; a filter that
    does not fit raises ``InvalidRequest``."""
    names, whole, types = requested_fields(read)
    if not names:
        return None
    database = endpoint.database_name
    query = mongo_filter(
        read.filters, types, where=lambda field: place(read.result_key, field, database)
    )
    projection = None
    if not whole:
        projection = dict.fromkeys(names, 1)
        if "_id" not in projection:
            projection["_id"] = 0
    return Query(read.result_key, read.table.name, names, whole, query, projection)
