"""MongoDB discovery by sampling (reference §3.8): a collection's fields and their BSON types.

Discovery: every collection (views and ``system.*`` left out) with its top-level fields, found by
sampling as the reference does (the first 1,000 documents, or a ``$sample`` of 1,000-10,000 in
larger collections, plus a ``$sample`` of 50); each field gets the BSON type of its sampled values
as ``Column.data_type`` (``objectId``, ``string``, ``int``, ``long``, ``double``, ``decimal``,
``bool``, ``date``, ``object``, ``array``, ``binData``, ``uuid``, ``timestamp``, ``regex``,
``null``...; numbers of several kinds are given the widest, other mixes are ``mixed``). Fields
come in first-seen order, ``_id`` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef

from domain.schema import Column, Table

FIRST_DOCUMENTS = 1_000
SAMPLE_ABOVE = 10_000
EXTRA_SAMPLE = 50
_NUMBER_RANK = {"int": 0, "long": 1, "double": 2, "decimal": 3}


def sample_size(count: int) -> int:
    """Documents sampled in a collection of ``count`` documents (reference §3.8)."""
    if count <= SAMPLE_ABOVE:
        return min(count, FIRST_DOCUMENTS)
    if count <= 100_000:
        return 2_000
    if count <= 1_000_000:
        return 5_000
    return 10_000


def bson_type(value: Any) -> str:
    """The BSON type name (as MongoDB's ``$type`` spells it) of a decoded value."""
    match value:
        case None:
            return "null"
        case bool():
            return "bool"
        case Int64():
            return "long"
        case int():
            return "int" if -(2**31) <= value < 2**31 else "long"
        case float():
            return "double"
        case str():
            return "string"
        case ObjectId():
            return "objectId"
        case datetime() | DatetimeMS():
            return "date"
        case Decimal128():
            return "decimal"
        case UUID():
            return "uuid"
        case bytes():
            return "binData"
        case DBRef():
            return "dbPointer"
        case dict():
            return "object"
        case list():
            return "array"
        case Timestamp():
            return "timestamp"
        case Regex():
            return "regex"
        case Code():
            return "javascript"
        case MinKey():
            return "minKey"
        case MaxKey():
            return "maxKey"
    return type(value).__name__.lower()


def field_type(types: set[str]) -> str:
    """One type for a field from the types of its sampled values."""
    kinds = types - {"null"}
    if not kinds:
        return "null"
    if len(kinds) == 1:
        return next(iter(kinds))
    if kinds <= _NUMBER_RANK.keys():
        return max(kinds, key=_NUMBER_RANK.__getitem__)
    return "mixed"


NESTED_DEPTH = 4
"""How deep ``nested`` discovery names the fields of embedded documents (``a.b.c.d``)."""


class _Fields:
    """Field names in first-seen order (``_id`` first) and their value types: the top-level
    ones, and with ``nested`` the dotted paths of embedded documents' fields too."""

    def __init__(self, *, nested: bool = False) -> None:
        self.types: dict[str, set[str]] = {"_id": set()}
        self._depth = NESTED_DEPTH if nested else 1

    def add(self, document: Mapping[str, Any], prefix: str = "", depth: int = 1) -> None:
        for name, value in document.items():
            path = prefix + name
            self.types.setdefault(path, set()).add(bson_type(value))
            if depth < self._depth and isinstance(value, dict):
                self.add(value, path + ".", depth + 1)

    def columns(self) -> tuple[Column, ...]:
        found = {name: types for name, types in self.types.items() if types}
        return tuple(Column(name, field_type(types)) for name, types in found.items())


async def sampled_table(collection: Any, name: str, *, nested: bool = False) -> Table:
    """The collection as a table: its top-level fields (and with ``nested`` the dotted paths
    inside embedded documents) from a sample of its documents."""
    fields = _Fields(nested=nested)
    count = await collection.estimated_document_count()
    if count > SAMPLE_ABOVE:
        cursor = await collection.aggregate([{"$sample": {"size": sample_size(count)}}])
    else:
        cursor = collection.find({}, limit=FIRST_DOCUMENTS, batch_size=FIRST_DOCUMENTS)
    async with cursor:
        async for document in cursor:
            fields.add(document)
    if count > FIRST_DOCUMENTS:
        async with await collection.aggregate([{"$sample": {"size": EXTRA_SAMPLE}}]) as extra:
            async for document in extra:
                fields.add(document)
    return Table(schema=None, name=name, columns=fields.columns())
