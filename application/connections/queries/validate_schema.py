"""ValidateSchema: do the requested datasources, tables and fields exist? (reference §2.4.7)"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as attribute
from enum import Enum

from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.errors import ForbiddenHost
from application.ports.datasource_reader import DatasourceReader
from application.ports.schema_cache import SchemaCache, SchemaKey
from domain import error_catalogue as catalogue
from domain.connection import Connection
from domain.errors import FetcherError, InvalidRequest, MissingFields
from domain.names import discovery_scope, normalise_field, normalise_table
from domain.request import WILDCARD
from domain.schema import Schema, Table
from domain.tenant import Tenant

log = logging.getLogger(__name__)

MAX_DATASOURCES = 10
MAX_TABLES = 20
MAX_FIELDS = 50

MappedFields = Mapping[str, Mapping[str, Sequence[str]]]


class ValidationLimitExceeded(InvalidRequest):
    entry = catalogue.VALIDATION_LIMIT_EXCEEDED


class IssueType(Enum):
    DATA_SOURCE_NOT_FOUND = "DATA_SOURCE_NOT_FOUND"
    DATA_SOURCE_DOWN = "DATA_SOURCE_DOWN"
    TABLE_NOT_FOUND = "TABLE_NOT_FOUND"
    FIELD_NOT_FOUND = "FIELD_NOT_FOUND"


@dataclass(frozen=True, slots=True, order=True)
class SchemaIssue:
    data_source: str
    table: str
    field: str
    type: IssueType = attribute(compare=False)


def _blank(text: str) -> bool:
    return not text.strip()


def check_request(mapped: MappedFields | None) -> MappedFields:
    """The request rules, in the reference's order; datasources and tables in name order."""
    if mapped is None:
        raise MissingFields(fields={"mappedFields": "mappedFields is a required field"})
    if not mapped:
        raise InvalidRequest("mappedFields cannot be empty")
    if len(mapped) > MAX_DATASOURCES:
        raise ValidationLimitExceeded(
            f"maximum {MAX_DATASOURCES} datasources allowed per validation request"
        )
    for name in sorted(mapped):
        tables = mapped[name]
        if _blank(name):
            raise InvalidRequest("config name cannot be empty or whitespace-only")
        if len(tables) > MAX_TABLES:
            raise ValidationLimitExceeded(
                f"maximum {MAX_TABLES} tables allowed per datasource, "
                f"got {len(tables)} for '{name}'"
            )
        for table in sorted(tables):
            fields = tables[table]
            if _blank(table):
                raise InvalidRequest(
                    f"table name cannot be empty or whitespace-only in datasource '{name}'"
                )
            if len(fields) > MAX_FIELDS:
                raise ValidationLimitExceeded(
                    f"maximum {MAX_FIELDS} fields allowed per table, "
                    f"got {len(fields)} for '{name}.{table}'"
                )
            if any(_blank(field) for field in fields):
                raise InvalidRequest(
                    f"field name cannot be empty or whitespace-only in '{name}.{table}'"
                )
    return mapped


def _has_field(table: Table, name: str) -> bool:
    return any(c.name == name or c.name.startswith(name + ".") for c in table.columns)


def table_issues(
    name: str, connection: Connection, schema: Schema, tables: Mapping[str, Sequence[str]]
) -> list[SchemaIssue]:
    issues: list[SchemaIssue] = []
    for requested in sorted(tables):
        table = schema.tables.get(normalise_table(connection.type, requested))
        if table is None:
            issues.append(SchemaIssue(name, requested, "", IssueType.TABLE_NOT_FOUND))
            continue
        for field in sorted(set(tables[requested])):
            if field == WILDCARD or _has_field(table, normalise_field(connection.type, field)):
                continue
            issues.append(SchemaIssue(name, requested, field, IssueType.FIELD_NOT_FOUND))
    return issues


@dataclass(slots=True)
class ValidateSchema:
    """Checks ``mappedFields`` against each datasource's schema, cache-first (the cache is
    keyed by connection id, connection version and discovery scope). Returns the issues
    sorted by datasource, table and field; ``["*"]`` is valid for any existing table.

    Datasources resolve among those ``tenant`` sees (another tenant's name is unknown). 400
    errors for the request rules (FET-0402, FET-0401, FET-1061) and FET-1062 when no
    datasource resolves; a host refused by the SSRF guard aborts with FET-0414. A datasource
    that cannot be reached or discovered is reported as ``DATA_SOURCE_DOWN``.
    """

    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader
    cache: SchemaCache | None = None

    async def __call__(self, mapped: MappedFields | None, *, tenant: Tenant) -> list[SchemaIssue]:
        mapped = check_request(mapped)
        names = sorted(mapped)
        connections = await self.directory.resolve(names, tenant=tenant)
        if not connections:
            raise InvalidRequest(entry=catalogue.NO_SCHEMA_CONNECTIONS)
        found = [name for name in names if name in connections]
        schemas = await asyncio.gather(
            *(self._schema(connections[name], mapped[name]) for name in found)
        )
        for outcome in schemas:
            if isinstance(outcome, ForbiddenHost):
                raise outcome
        by_name = dict(zip(found, schemas, strict=True))
        issues: list[SchemaIssue] = []
        for name in names:
            connection = connections.get(name)
            schema = by_name.get(name)
            if connection is None:
                issues.append(SchemaIssue(name, "", "", IssueType.DATA_SOURCE_NOT_FOUND))
            elif not isinstance(schema, Schema):
                issues.append(SchemaIssue(name, "", "", IssueType.DATA_SOURCE_DOWN))
            else:
                issues.extend(table_issues(name, connection, schema, mapped[name]))
        return sorted(issues)

    async def _schema(
        self, connection: Connection, tables: Mapping[str, Sequence[str]]
    ) -> Schema | ForbiddenHost | None:
        """The schema, the guard's refusal, or None when the datasource is down."""
        key = SchemaKey(
            connection.id,
            connection.version,
            discovery_scope(connection.type, list(tables)),
            connection.tenant,
        )
        if self.cache is not None:
            cached = await self.cache.get(key)
            if cached is not None:
                return cached
        try:
            endpoint = self.endpoints.endpoint(connection)
            schema = await self.reader.discover(endpoint, key.scope)
        except ForbiddenHost as refused:
            return refused
        except (FetcherError, TimeoutError) as error:
            log.info("schema of %s not discovered: %s", connection.config_name, error)
            return None
        if self.cache is not None:
            await self.cache.put(key, schema)
        return schema
