"""Planning an extraction: discover each datasource's schema and check the request against it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from application.errors import DatasourceError, ForbiddenHost, InvalidSslMode
from application.ports.datasource_reader import DatasourceReader
from domain.connection import Connection, Endpoint
from domain.errors import ExtractionFailed
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


def validation_error(detail: str) -> ExtractionError:
    return ExtractionError("validation", "extraction request failed schema validation", detail)


@dataclass(frozen=True, slots=True)
class DatasourcePlan:
    config_name: str
    endpoint: Endpoint
    reads: tuple[TableRead, ...]


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
    connection: Connection, filters: Mapping[str, Any]
) -> dict[str, Mapping[str, Any]]:
    return {normalise_table(connection.type, table): fields for table, fields in filters.items()}


def build_reads(
    config_name: str,
    connection: Connection,
    schema: Schema,
    tables: Mapping[str, Sequence[str]],
    filters: Mapping[str, Any],
) -> tuple[TableRead, ...]:
    reads: list[TableRead] = []
    table_filters = _filters_by_table(connection, filters)
    for key, fields in _merged_tables(connection, tables).items():
        table = schema.tables.get(key)
        if table is None:
            raise validation_error(f"table '{key}' not found in datasource '{config_name}'")
        if fields == [WILDCARD]:
            columns = table.columns
        else:
            picked = []
            for field in fields:
                column = table.column(normalise_field(connection.type, field))
                if column is None:
                    raise validation_error(f"field '{field}' not found in '{config_name}.{key}'")
                picked.append(column)
            columns = tuple(picked)
        conditions: dict[str, dict[str, tuple[Any, ...]]] = {}
        for field, condition in table_filters.get(key, {}).items():
            name = normalise_field(connection.type, field)
            if table.column(name) is None:
                raise validation_error(f"filter field '{field}' not found in '{config_name}.{key}'")
            ops = {op: tuple(values) for op, values in condition.items() if values}
            if ops:
                conditions[name] = ops
        reads.append(TableRead(result_key=key, table=table, columns=columns, filters=conditions))
    return tuple(reads)


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
        message = (
            "failed to connect to datasource"
            if error.stage == "connect"
            else "failed to discover datasource schema"
        )
        raise ExtractionError("unavailable", message) from error
    reads = build_reads(config_name, connection, schema, tables, filters)
    return DatasourcePlan(config_name=config_name, endpoint=endpoint, reads=reads)
