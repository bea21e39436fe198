"""Table and field names per engine: qualification, normalisation, discovery scope (reference
§4.3-4.4). Results are keyed by the normalised name."""

from __future__ import annotations

from collections.abc import Iterable

from domain.connection import DEFAULT_SCHEMA, DatabaseType


def split_table(db_type: DatabaseType, name: str) -> tuple[str | None, str]:
    parts = name.split(".")
    if len(parts) == 3:  # catalog.schema.table: the catalog is dropped
        parts = parts[1:]
    if len(parts) == 2:
        return parts[0], parts[1]
    return None, parts[0]


def normalise_table(db_type: DatabaseType, name: str) -> str:
    schema, table = split_table(db_type, name)
    if db_type is DatabaseType.ORACLE:
        return name.upper() if schema is None else f"{schema}.{table}".upper()
    default = DEFAULT_SCHEMA.get(db_type)
    if schema is None or (default is not None and schema.lower() == default):
        return table
    return f"{schema}.{table}"


def normalise_field(db_type: DatabaseType, name: str) -> str:
    return name.upper() if db_type is DatabaseType.ORACLE else name


def discovery_scope(db_type: DatabaseType, names: Iterable[str]) -> tuple[str, ...]:
    if db_type in (DatabaseType.MYSQL, DatabaseType.MONGODB):
        return ()
    scope: list[str] = []
    unqualified = False
    for name in names:
        schema, _ = split_table(db_type, name)
        if schema is None:
            unqualified = True
        elif schema not in scope:
            scope.append(schema.upper() if db_type is DatabaseType.ORACLE else schema)
    default = DEFAULT_SCHEMA.get(db_type)
    if unqualified and default is not None and scope and default not in scope:
        scope.append(default)
    return tuple(scope)
