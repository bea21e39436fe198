"""MongoDB datasource reader on pymongo's async client: connection test, discovery by sampling,
streamed extraction with projection and typed filters.

Connection and TLS: ``connection``. Discovery by sampling: ``schema``. Queries and filters:
``statements``. BSON values in the common result format: ``values``.

Extraction: documents stream in batches of ``chunk_rows``. Every row has every requested field
(``null`` when the document lacks it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Unpack

import msgspec
from pymongo import AsyncMongoClient
from pymongo.asynchronous.cursor import AsyncCursor
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.common.failures import unavailable
from adapters.datasources.common.reader_base import (
    EngineReader,
    ReaderSettings,
    discovery_failed,
)
from adapters.datasources.mongodb.connection import new_client
from adapters.datasources.mongodb.crm import (
    CrmQuery,
    Decryptor,
    collections_missing,
    covers,
    crm_query,
    crm_row,
    logical_tables,
)
from adapters.datasources.mongodb.schema import sampled_table
from adapters.datasources.mongodb.statements import Query, find_query
from adapters.datasources.mongodb.values import bson_value, top_level
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.crm import CrmKeys
from domain.errors import FetcherError
from domain.schema import Schema, Table, TableRead

SYSTEM_NAMES = frozenset({"admin", "local", "config"})
_AUTH_FAILED = 18


class MongoReader(EngineReader[Query | CrmQuery]):
    """Reads MongoDB datasources, and the CRM plugin's through its compatibility path
    (``crm``) with ``crm_keys``. Holds no client between calls."""

    def __init__(
        self, *, crm_keys: CrmKeys | None = None, **settings: Unpack[ReaderSettings]
    ) -> None:
        super().__init__(**settings)
        self._encode = msgspec.json.Encoder(enc_hook=bson_value).encode
        self._crm_keys = crm_keys or CrmKeys()
        self._decryptor = Decryptor(self._crm_keys.encrypt_key)

    def _client(self, endpoint: Endpoint, timeout: float) -> AsyncMongoClient[dict[str, Any]]:
        try:
            return new_client(endpoint, timeout)
        except FetcherError:
            raise
        except Exception as error:  # bad options or certificates
            raise unavailable(error) from error

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        client = self._client(endpoint, timeout)
        try:
            async with asyncio.timeout(timeout):
                await client.admin.command("ping")
        except Exception as error:
            raise unavailable(error) from error
        finally:
            await client.close()

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        client = self._client(endpoint, self._connect_timeout)
        try:
            async with asyncio.timeout(self._discover_timeout):
                database = client[endpoint.database_name]
                try:
                    infos = await (await database.list_collections()).to_list()
                except (ConnectionFailure, OperationFailure) as error:
                    if isinstance(error, OperationFailure) and error.code != _AUTH_FAILED:
                        raise
                    raise unavailable(error) from error
                names = sorted(
                    info["name"]
                    for info in infos
                    if info.get("type", "collection") == "collection"
                    and not info["name"].startswith("system.")
                    and info["name"] not in SYSTEM_NAMES
                )
                gate = asyncio.Semaphore(4)
                nested = endpoint.plugin_crm

                async def sample(name: str) -> Table:
                    async with gate:
                        return await sampled_table(database[name], name, nested=nested)

                tables = await asyncio.gather(*(sample(name) for name in names))
        except FetcherError:
            raise
        except Exception as error:
            raise discovery_failed(error) from error
        finally:
            await client.close()
        if endpoint.plugin_crm:
            return Schema(tables=logical_tables(tables))
        return Schema(tables={table.name: table for table in tables})

    def statement(self, endpoint: Endpoint, read: TableRead) -> Query | CrmQuery | None:
        if endpoint.plugin_crm:
            return crm_query(endpoint, read, self._crm_keys)
        return find_query(endpoint, read)

    async def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Query | CrmQuery]
    ) -> AsyncGenerator[RowChunk, None]:
        queries = prepared.steps
        if not queries:
            return
        client = self._client(endpoint, self._connect_timeout)
        try:
            database = client[endpoint.database_name]
            for query in queries:
                if isinstance(query, Query):
                    cursor = database[query.collection].find(
                        query.filter, query.projection, batch_size=self._chunk_rows
                    )
                    async for chunk in self._chunks(query, cursor, query.collection):
                        yield chunk
                    continue
                for collection in await self._covered(database, query.logical):
                    cursor = database[collection].find(
                        query.filter,
                        query.projection,
                        sort=[("_id", 1)],
                        batch_size=self._chunk_rows,
                    )
                    async for chunk in self._chunks(query, cursor, collection):
                        yield chunk
        finally:
            await client.close()

    async def _chunks(
        self, query: Query | CrmQuery, cursor: AsyncCursor[dict[str, Any]], collection: str
    ) -> AsyncGenerator[RowChunk, None]:
        async with cursor:
            while True:
                documents = await self._fetch(cursor)
                if not documents:
                    break
                with paused_gc():
                    if isinstance(query, Query):
                        data = self._rows(query, documents)
                    else:
                        data = self._crm_rows(query, documents, collection)
                yield RowChunk(query.result_key, data, len(documents))
                if len(documents) < self._chunk_rows:
                    break

    async def _covered(self, database: Any, logical: str) -> list[str]:
        """The physical collections of a CRM logical collection, in name order."""
        try:
            async with asyncio.timeout(self._query_timeout):
                names = await database.list_collection_names()
        except ConnectionFailure as error:
            raise unavailable(error) from error
        except (PyMongoError, TimeoutError) as error:
            raise DatasourceQueryFailed() from error
        found = sorted(name for name in names if covers(logical, name))
        if not found:
            raise collections_missing(logical)
        return found

    def _crm_rows(self, query: CrmQuery, documents: list[dict[str, Any]], collection: str) -> bytes:
        rows = [crm_row(query, document, collection, self._decryptor) for document in documents]
        return self._encoded(rows)

    async def _fetch(self, cursor: AsyncCursor[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            async with asyncio.timeout(self._query_timeout):
                return await cursor.to_list(self._chunk_rows)
        except ConnectionFailure as error:
            raise unavailable(error) from error
        except OperationFailure as error:
            if error.code == _AUTH_FAILED:
                raise unavailable(error) from error
            raise DatasourceQueryFailed() from error
        except (PyMongoError, TimeoutError) as error:
            raise DatasourceQueryFailed() from error

    def _rows(self, query: Query, documents: list[dict[str, Any]]) -> bytes:
        names = query.names
        rows: list[dict[str, Any]] = []
        for document in documents:
            row = {name: top_level(document.get(name)) for name in names}
            if query.whole and not document.keys() <= row.keys():
                for name, value in document.items():
                    if name not in row:
                        row[name] = top_level(value)
                row = dict(sorted(row.items()))
            rows.append(row)
        return self._encoded(rows)

    def _encoded(self, rows: list[dict[str, Any]]) -> bytes:
        try:
            return self._encode(rows)[1:-1]
        except (TypeError, ValueError, OverflowError) as error:
            raise DatasourceQueryFailed(
                "failed to read datasource rows: a value has no JSON form"
            ) from error
