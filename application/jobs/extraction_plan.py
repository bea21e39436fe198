"""Planning an extraction: discover each datasource's schema, check the request against it and
prepare the reads (``DatasourceReader.prepare``) that the run then streams.

Every mismatch fails the job before any row is read, with the reference's prefix
(``engine extraction: engine: [validation] ...``) and a ``FET-0401 - <detail>`` naming the
datasource, table, field and operator: a mapped table or field that is not in the schema, a filter
on a table that is not mapped (or not in the schema), a filter on a field that is not a column, and
a filter value that does not convert to its column's type.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from application.errors import (
    DatasourceDataError,
    DatasourceError,
    ForbiddenHost,
    InvalidSslMode,
)
from application.ports.datasource_reader import DatasourceReader, PreparedReads
from domain import error_catalogue as catalogue
from domain.connection import Connection, Endpoint
from domain.errors import ExtractionFailed, InvalidRequest
from domain.names import discovery_scope, normalise_field, normalise_table
from domain.request import WILDCARD
from domain.schema import Schema, TableRead

PREFIX = "engine extraction: engine: "


class ExtractionError(ExtractionFailed):
    """A failure whose text follows the reference's categories (``[validation] ...``)."""

    def __init__(self, category: str, message: str, detail: str = "") -> None:
        text = f"{PREFIX}[{category}] {message}"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.category = category
        self.detail = detail


def datasource_failure(error: DatasourceError, otherwise: str) -> ExtractionError:
    """The reference's text of a datasource that failed: it could not be connected to, what
    it holds cannot be read as asked (the adapter's own words), or ``otherwise``."""
    if isinstance(error, DatasourceDataError):
        return ExtractionError(error.category, error.message)
    if error.stage == "connect":
        return ExtractionError("unavailable", "failed to connect to datasource")
    return ExtractionError("unavailable", otherwise)


def validation_error(detail: str) -> ExtractionError:
    return ExtractionError("validation", "extraction request failed schema validation", detail)


INVALID_REQUEST = catalogue.INVALID_DATA_REQUEST.code


def _invalid_filter(detail: str) -> ExtractionError:
    return validation_error(f"{INVALID_REQUEST} - {detail}")


def _operators(condition: Mapping[str, Any]) -> str:
    ops = list(condition) or ["(none)"]
    return ", ".join(f"'{op}'" for op in ops)


@dataclass(frozen=True, slots=True)
class DatasourcePlan:
    """One datasource of a job: where to read (``endpoint``, secrets included: never log it),
    what (``reads``), and the reads as the reader prepared them, ready to stream."""

    config_name: str
    endpoint: Endpoint
    reads: tuple[TableRead, ...]
    prepared: PreparedReads[Any]


def _merged_tables(
    connection: Connection, tables: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    merged: dict[str, list[str]] = {}
    for table, fields in tables.items():
        if not fields:
            continue
        key = normalise_table(connection.type, table)
        target = merged.setdefault(key, [])
        target.extend(f for f in fields if f not in target)
    return merged


def _filters_by_table(
    config_name: str, connection: Connection, filters: Mapping[str, Any]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Filters by normalised table, then normalised field; two spellings of one table (or of one
    field) merge, but may not give one operator twice."""
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for table, fields in filters.items():
        target = merged.setdefault(normalise_table(connection.type, table), {})
        for field, condition in fields.items():
            ops = target.setdefault(normalise_field(connection.type, field), {})
            for op, values in condition.items():
                if op in ops and list(ops[op]) != list(values):
                    raise _invalid_filter(
                        f"filter on field '{field}' of table '{table}' in datasource "
                        f"'{config_name}' gives operator '{op}' twice (under two spellings)"
                    )
                ops[op] = values
    return merged


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x' or 'y'?)`` naming up to three known names closest to ``name``
    (case aside), or nothing when none is close."""
    names = list(known)
    by_folded = {each.casefold(): each for each in names}
    close = difflib.get_close_matches(name.casefold(), list(by_folded), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"'{by_folded[each]}'" for each in close) + "?)"


def build_reads(
    config_name: str,
    connection: Connection,
    schema: Schema,
    tables: Mapping[str, Sequence[str]],
    filters: Mapping[str, Any],
) -> tuple[TableRead, ...]:
    reads: list[TableRead] = []
    table_filters = _filters_by_table(config_name, connection, filters)
    mapped = _merged_tables(connection, tables)
    for key, fields in mapped.items():
        table = schema.tables.get(key)
        if table is None:
            raise validation_error(
                f"table '{key}' not found in datasource '{config_name}'"
                + did_you_mean(key, schema.tables)
            )
        if fields == [WILDCARD]:
            columns = table.columns
        else:
            picked = []
            for field in fields:
                column = table.column(normalise_field(connection.type, field))
                if column is None:
                    raise validation_error(
                        f"field '{field}' not found in '{config_name}.{key}'"
                        + did_you_mean(field, [c.name for c in table.columns])
                    )
                picked.append(column)
            columns = tuple(picked)
        conditions: dict[str, dict[str, tuple[Any, ...]]] = {}
        for name, condition in table_filters.get(key, {}).items():
            if table.column(name) is None:
                raise _invalid_filter(
                    f"filter on field '{name}' (operator {_operators(condition)}) of table "
                    f"'{key}' in datasource '{config_name}': the field is not a column of the table"
                )
            ops = {op: tuple(values) for op, values in condition.items() if values}
            if ops:
                conditions[name] = ops
        reads.append(TableRead(result_key=key, table=table, columns=columns, filters=conditions))
    for key, conditions_by_field in table_filters.items():
        if key not in mapped and conditions_by_field:
            where = "is not in the datasource" if key not in schema.tables else "is not mapped"
            field, condition = next(iter(conditions_by_field.items()))
            raise _invalid_filter(
                f"filter on field '{field}' (operator {_operators(condition)}) of table '{key}' "
                f"in datasource '{config_name}': the table {where} (filters apply to the "
                "tables of mappedFields)"
            )
    return tuple(reads)


def _prepared(
    config_name: str, endpoint: Endpoint, reads: Sequence[TableRead], reader: DatasourceReader
) -> PreparedReads[Any]:
    """The reads as the reader builds them (no I/O); a filter value that does not convert to its
    column type fails now, naming the datasource."""
    try:
        return reader.prepare(endpoint, reads)
    except InvalidRequest as error:
        raise ExtractionError(
            "validation",
            "invalid filter value",
            f"{INVALID_REQUEST} - in datasource '{config_name}', {error.message}",
        ) from error


async def plan_datasource(
    config_name: str,
    connection: Connection,
    endpoint: Endpoint,
    tables: Mapping[str, Sequence[str]],
    filters: Mapping[str, Any],
    reader: DatasourceReader,
) -> DatasourcePlan:
    scope = discovery_scope(connection.type, [t for t, f in tables.items() if f])
    try:
        schema = await reader.discover(endpoint, scope)
    except (ForbiddenHost, InvalidSslMode):
        raise
    except DatasourceError as error:
        raise datasource_failure(error, "failed to discover datasource schema") from error
    reads = build_reads(config_name, connection, schema, tables, filters)
    prepared = _prepared(config_name, endpoint, reads, reader)
    return DatasourcePlan(
        config_name=config_name, endpoint=endpoint, reads=reads, prepared=prepared
    )
