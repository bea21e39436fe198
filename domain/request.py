"""The extraction request: which fields of which tables of which datasources, with filters.

Rules and messages follow the reference service (its §2.4.11, §4.1-4.5); the table/field limits
that the reference only enforces in its worker are enforced here, when the job is asked for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from domain import error_catalogue as catalogue
from domain import gojson
from domain.errors import InvalidRequest, MissingFields
from domain.json_limits import json_problem, number_problem

MAX_DATASOURCES = 10
MAX_TABLES_PER_DATASOURCE = 20
MAX_FIELDS_PER_TABLE = 50
WILDCARD = "*"

OPERATORS: tuple[str, ...] = ("eq", "gt", "gte", "lt", "lte", "between", "in", "nin", "ne", "like")
_SINGLE_VALUE = frozenset({"gt", "gte", "lt", "lte"})

MappedFields = Mapping[str, Mapping[str, Sequence[str]]]
Condition = Mapping[str, Sequence[Any]]
Filters = Mapping[str, Mapping[str, Mapping[str, Condition]]]


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON-ready copy (dicts and lists) of a frozen structure."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


def _is_blank(text: str) -> bool:
    return not text.strip()


def _check_table_name(config: str, table: str) -> None:
    parts = table.split(".")
    if len(parts) > 3 or any(_is_blank(p) for p in parts):
        raise InvalidRequest(
            f"invalid table name '{table}' in datasource '{config}': expected 'table', "
            "'schema.table' or 'catalog.schema.table'"
        )


def _check_mapped_fields(mapped: MappedFields) -> None:
    if len(mapped) == 0:
        raise InvalidRequest("mappedFields cannot be empty")
    if len(mapped) > MAX_DATASOURCES:
        raise InvalidRequest(
            f"Maximum {MAX_DATASOURCES} datasources allowed per job, got {len(mapped)}"
        )
    for tables in mapped.values():
        if not any(len(fields) > 0 for fields in tables.values()):
            raise InvalidRequest("datasource must have at least one table with fields")
    for config, tables in mapped.items():
        if _is_blank(config):
            raise InvalidRequest("config name cannot be empty or whitespace-only")
        if len(tables) > MAX_TABLES_PER_DATASOURCE:
            raise InvalidRequest(
                f"maximum {MAX_TABLES_PER_DATASOURCE} tables allowed per datasource, "
                f"got {len(tables)} for '{config}'"
            )
        for table, fields in tables.items():
            if _is_blank(table):
                raise InvalidRequest(
                    f"table name cannot be empty or whitespace-only in datasource '{config}'"
                )
            _check_table_name(config, table)
            if len(fields) > MAX_FIELDS_PER_TABLE:
                raise InvalidRequest(
                    f"maximum {MAX_FIELDS_PER_TABLE} fields allowed per table, "
                    f"got {len(fields)} for '{config}.{table}'"
                )
            for field in fields:
                if _is_blank(field):
                    raise InvalidRequest(
                        f"field name cannot be empty or whitespace-only in '{config}.{table}'"
                    )
            if WILDCARD in fields and len(fields) != 1:
                raise InvalidRequest(
                    f"the wildcard \"*\" must be the only field of '{config}.{table}'"
                )


def _check_metadata(metadata: Mapping[str, Any] | None) -> None:
    if metadata is None:
        raise MissingFields(
            "metadata is required and must contain 'source' field",
            entry=catalogue.MISSING_REQUIRED_FIELD,
        )
    if metadata.get("source") is None:
        raise MissingFields(
            "metadata.source is required for job notification routing",
            entry=catalogue.MISSING_REQUIRED_FIELD,
        )
    source = metadata["source"]
    if not isinstance(source, str) or _is_blank(source):
        raise MissingFields(
            "metadata.source must be a non-empty string", entry=catalogue.INVALID_FIELD_VALUE
        )
    problem = json_problem(metadata)
    if problem is not None:
        raise InvalidRequest(f"metadata {problem}")


def _check_filter_references(mapped: MappedFields, filters: Filters) -> None:
    unknown = [name for name in filters if name not in mapped]
    if unknown:
        raise InvalidRequest(
            "; ".join(
                f"filter references unknown datasource '{name}' not found in mappedFields"
                for name in unknown
            ),
            entry=catalogue.INVALID_FILTER_REFERENCES,
        )


def _check_value(where: str, op: str, value: Any) -> None:
    if isinstance(value, Mapping | list | tuple):
        raise InvalidRequest(f"{where}: operator '{op}' takes scalar values, got a nested value")
    problem = number_problem(value)
    if problem is not None:
        raise InvalidRequest(f"{where}: operator '{op}' got {problem}")


def _check_filter_conditions(filters: Filters) -> None:
    for config, tables in filters.items():
        for table, fields in tables.items():
            for field, condition in fields.items():
                where = f"filter on '{config}.{table}.{field}'"
                for op, values in condition.items():
                    if op not in OPERATORS:
                        raise InvalidRequest(
                            f"{where}: unknown operator '{op}' "
                            f"(expected one of {', '.join(OPERATORS)})"
                        )
                    n = len(values)
                    if n == 0:
                        continue
                    if op == "between" and n != 2:
                        raise InvalidRequest(
                            f"{where}: between operator must have exactly 2 values, got {n}"
                        )
                    if op in _SINGLE_VALUE and n != 1:
                        raise InvalidRequest(
                            f"{where}: {op} operator must have exactly 1 value, got {n}"
                        )
                    if op == "like" and (n != 1 or not isinstance(values[0], str)):
                        raise InvalidRequest(
                            f"{where}: like operator takes exactly 1 string pattern"
                        )
                    for value in values:
                        _check_value(where, op, value)


def filters_json(filters: Filters) -> str:
    """Go JSON of the filters as the reference decodes, stores and returns them: maps with
    sorted keys, each condition's operators in their fixed order, empty operators left out."""
    return _raw_map(
        {
            config: _raw_map(
                {
                    table: _raw_map(
                        {
                            field: gojson.encode_ordered(
                                [
                                    (op, gojson.encode(condition[op]))
                                    for op in OPERATORS
                                    if condition.get(op)
                                ]
                            )
                            for field, condition in fields.items()
                        }
                    )
                    for table, fields in tables.items()
                }
            )
            for config, tables in filters.items()
        }
    )


def canonical_json(
    mapped: MappedFields, filters: Filters | None, metadata: Mapping[str, Any] | None
) -> bytes:
    """The bytes the reference hashes: Go JSON of the decoded request (reference §4.7)."""
    data_request = [("mappedFields", gojson.encode(mapped))]
    if filters:
        data_request.append(("filters", filters_json(filters)))
    top = [("dataRequest", gojson.encode_ordered(data_request))]
    if metadata:
        top.append(("metadata", gojson.encode(metadata)))
    return gojson.encode_ordered(top).encode("utf-8")


def _raw_map(encoded: Mapping[str, str]) -> str:
    items = sorted(encoded.items(), key=lambda kv: kv[0].encode("utf-8", "surrogatepass"))
    return "{" + ",".join(f"{gojson.encode_string(k)}:{v}" for k, v in items) + "}"


@dataclass(frozen=True, slots=True)
class ExtractionRequest:
    """A validated request. Build it with :meth:`create`; it is immutable."""

    mapped_fields: MappedFields
    filters: Filters
    metadata: Mapping[str, Any]
    request_hash: str

    @classmethod
    def create(
        cls,
        mapped_fields: MappedFields | None,
        filters: Filters | None,
        metadata: Mapping[str, Any] | None,
    ) -> ExtractionRequest:
        if mapped_fields is None:
            raise InvalidRequest("mappedFields is required")
        _check_mapped_fields(mapped_fields)
        _check_metadata(metadata)
        assert_filters = filters or {}
        _check_filter_references(mapped_fields, assert_filters)
        _check_filter_conditions(assert_filters)
        digest = hashlib.sha256(canonical_json(mapped_fields, filters, metadata)).hexdigest()
        return cls(
            mapped_fields=_freeze(mapped_fields),
            filters=_freeze(assert_filters),
            metadata=_freeze(metadata or {}),
            request_hash=digest,
        )

    @classmethod
    def restore(cls, data: Mapping[str, Any], request_hash: str) -> ExtractionRequest:
        """Rebuild from a recorded ``to_dict()`` without validating again."""
        return cls(
            mapped_fields=_freeze(data["mappedFields"]),
            filters=_freeze(data.get("filters") or {}),
            metadata=_freeze(data.get("metadata") or {}),
            request_hash=request_hash,
        )

    @property
    def source(self) -> str:
        return str(self.metadata["source"])

    @property
    def datasource_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.mapped_fields))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"mappedFields": thaw(self.mapped_fields)}
        if self.filters:
            data["filters"] = thaw(self.filters)
        data["metadata"] = thaw(self.metadata)
        return data
