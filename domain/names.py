"""Table and field names per engine: qualification, normalisation, discovery scope (reference
§4.3-4.4). Results are keyed by the normalised name."""

from __future__ import annotations

from collections.abc import Iterable

from domain.connection import DEFAULT_SCHEMA, DatabaseType


def split_table(db_type: DatabaseType, name: str) -> tuple[str | None, str]:
    """``(schema, table)``; SQL Server's ``catalog.schema.table`` drops the catalog."""
    parts = name.split(".")
    if len(parts) == 3 and db_type is DatabaseType.SQL_SERVER:
        parts = parts[1:]
    if len(parts) == 2:
        return parts[0], parts[1]
    return None, name


def _schema_of(db_type: DatabaseType, schema: str) -> str:
    """A schema as discovery knows it: the default spelled canonically, Oracle upper-cased."""
    if db_type is DatabaseType.ORACLE:
        return schema.upper()
    default = DEFAULT_SCHEMA.get(db_type)
    if default is not None and schema.lower() == default:
        return default
    return schema


def normalise_table(db_type: DatabaseType, name: str) -> str:
    schema, table = split_table(db_type, name)
    if db_type is DatabaseType.ORACLE:
        return table.upper() if schema is None else f"{schema}.{table}".upper()
    if schema is None:
        return table
    schema = _schema_of(db_type, schema)
    return table if schema == DEFAULT_SCHEMA.get(db_type) else f"{schema}.{table}"


def normalise_field(db_type: DatabaseType, name: str) -> str:
    return name.upper() if db_type is DatabaseType.ORACLE else name


def discovery_scope(db_type: DatabaseType, names: Iterable[str]) -> tuple[str, ...]:
    """Schemas to discover for the requested tables: their distinct schema prefixes, plus the
    engine's default schema when any name is unqualified. Empty means "the connection's schema,
    else the engine default"."""
    if db_type in (DatabaseType.MYSQL, DatabaseType.MONGODB):
        return ()
    scope: list[str] = []
    unqualified = False
    for name in names:
        schema, _ = split_table(db_type, name)
        if schema is None:
            unqualified = True
            continue
        schema = _schema_of(db_type, schema)
        if schema not in scope:
            scope.append(schema)
    default = DEFAULT_SCHEMA.get(db_type)
    if unqualified and default is not None and default not in scope:
        scope.append(default)
    return tuple(scope)
