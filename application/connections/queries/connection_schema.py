"""GetConnectionSchema: a fresh discovery of one connection (reference §2.4.8)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from uuid import UUID

from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.errors import (
    ConnectionTestFailed,
    DatasourceError,
    ForbiddenHost,
    InvalidSslMode,
    SchemaRetrievalFailed,
)
from application.ports.datasource_reader import DatasourceReader
from domain.connection import Connection
from domain.errors import EntityNotFound
from domain.schema import Column
from domain.tenant import Tenant

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TableSummary:
    name: str
    """The normalised name: unqualified in the engine's default schema, else ``schema.table``."""
    columns: tuple[Column, ...]
    """Sorted by name, with the engine's type names."""


@dataclass(frozen=True, slots=True)
class ConnectionSchema:
    connection: Connection
    tables: tuple[TableSummary, ...]
    """Sorted by name."""


@dataclass(slots=True)
class GetConnectionSchema:
    """Discovers the connection's tables now (the cache is neither read nor written) in its
    default scope: the connection's ``schema`` if set, else the engine default. System objects
    are already removed by the engine adapter. Errors: 404 FET-1001; FET-0414 and FET-0413 as
    they are; 500 FET-1041 when the database cannot be reached, 500 FET-1042 when it was
    reached but discovery failed. Only connections ``tenant`` sees are found."""

    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader

    async def __call__(self, connection_id: UUID, *, tenant: Tenant) -> ConnectionSchema:
        connection = await self.directory.by_id(connection_id, tenant=tenant)
        if connection is None:
            raise EntityNotFound("connection")
        endpoint = self.endpoints.endpoint(connection)
        try:
            schema = await self.reader.discover(endpoint, ())
        except (ForbiddenHost, InvalidSslMode):
            raise
        except DatasourceError as error:
            log.info("schema of %s not discovered: %s", connection.config_name, error)
            if error.stage == "connect":
                raise ConnectionTestFailed.caused_by(error) from error
            raise SchemaRetrievalFailed() from error
        except TimeoutError as error:
            raise SchemaRetrievalFailed() from error
        tables = tuple(
            TableSummary(name, tuple(sorted(table.columns, key=lambda c: c.name)))
            for name, table in sorted(schema.tables.items())
        )
        return ConnectionSchema(connection=connection, tables=tables)
