"""MongoDB datasource reader on pymongo's async client: connection test, discovery by sampling,
streamed extraction with projection and typed filters.

Connection and TLS: ``mongo_connection``. Discovery by sampling: ``mongo_schema``. Filters:
``mongo_filters``.

Extraction: the requested fields are projected (``_id`` only when asked for); when every discovered
field is asked for (the ``["*"]`` wildcard) documents come whole, with the fields the sample missed.
Documents stream in batches of ``chunk_rows``. Every row has every requested field (``null`` when
the document lacks it).

BSON values in the result (otherwise as ``adapters.datasources.common.encoding``):

===================  ===========================================================================
BSON type            JSON value
===================  ===========================================================================
objectId             24-character hexadecimal string
decimal (128)        string with the exact digits (``"1.50"``, ``"NaN"``)
int, long            number
double               number; NaN/±Infinity at the top level as ``"NaN"``/``"Infinity"``/...
date                 RFC 3339 in UTC with ``Z`` (milliseconds as 6 digits when non-zero); dates
                     outside years 1-9999 as their milliseconds since the epoch (number)
binData              standard base64 string; subtype 4 (UUID) as the canonical UUID string
object, array        embedded JSON (nested values converted the same way)
timestamp            ``{"t": seconds, "i": increment}``
regex                ``{"pattern": ..., "options": ...}``
javascript, symbol   string
minKey, maxKey       ``"MinKey"``, ``"MaxKey"``
===================  ===========================================================================
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import msgspec
from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.mongodb.connection import new_client
from adapters.datasources.mongodb.statements import mongo_filter
from adapters.datasources.mongodb.schema import sampled_table
from adapters.datasources.common.reader_base import EngineReader, ReaderSettings
from application.errors import DatasourceError, DatasourceQueryFailed, DatasourceUnavailable
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import Schema, Table, TableRead

SYSTEM_NAMES = frozenset({"admin", "local", "config"})
_AUTH_FAILED = 18


def _bson_value(value: Any) -> Any:
    """msgspec's hook for the BSON types it does not encode by itself."""
    match value:
        case ObjectId() | Decimal128() | Code():
            return str(value)
        case Int64():
            return int(value)
        case bytes():  # Binary of a subtype other than 0 and 4
            return bytes(value)
        case DatetimeMS():
            return int(value)
        case Timestamp():
            return {"t": value.time, "i": value.inc}
        case Regex():
            return {"pattern": str(value.pattern), "options": value.flags_string()}
        case DBRef():
            return value.as_doc()
        case MinKey():
            return "MinKey"
        case MaxKey():
            return "MaxKey"
    raise TypeError(f"unsupported BSON value of type {type(value).__name__}")


def _top_level(value: Any) -> Any:
    if value.__class__ is float and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


@dataclass(frozen=True, slots=True)
class _Query:
    result_key: str
    collection: str
    names: tuple[str, ...]
    whole: bool
    filter: dict[str, Any]
    projection: dict[str, int] | None


class MongoReader(EngineReader):
    """Reads MongoDB datasources. Holds no client between calls."""

    def __init__(self, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._encode = msgspec.json.Encoder(enc_hook=_bson_value).encode

    def _client(self, endpoint: Endpoint, timeout: float) -> AsyncMongoClient[dict[str, Any]]:
        try:
            return new_client(endpoint, timeout)
        except FetcherError:
            raise
        except Exception as error:  # bad options or certificates
            raise DatasourceUnavailable("failed to connect to datasource") from error

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        client = self._client(endpoint, timeout)
        try:
            async with asyncio.timeout(timeout):
                await client.admin.command("ping")
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error
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
                    raise DatasourceUnavailable("failed to connect to datasource") from error
                names = sorted(
                    info["name"]
                    for info in infos
                    if info.get("type", "collection") == "collection"
                    and not info["name"].startswith("system.")
                    and info["name"] not in SYSTEM_NAMES
                )
                gate = asyncio.Semaphore(4)

                async def sample(name: str) -> Table:
                    async with gate:
                        return await sampled_table(database[name], name)

                tables = await asyncio.gather(*(sample(name) for name in names))
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceError(
                "failed to discover datasource schema", stage="discover"
            ) from error
        finally:
            await client.close()
        return Schema(tables={table.name: table for table in tables})

    def _query(self, endpoint: Endpoint, read: TableRead) -> _Query | None:
        names = tuple(sorted({c.name for c in read.columns}))
        if not names:
            return None
        whole = {c.name for c in read.table.columns} <= set(names)
        types = {c.name: c.data_type for c in read.table.columns}
        database = endpoint.database_name
        query = mongo_filter(
            read.filters,
            types,
            where=lambda field: f"'{read.result_key}.{field}' of database '{database}'",
        )
        projection = None
        if not whole:
            projection = dict.fromkeys(names, 1)
            if "_id" not in projection:
                projection["_id"] = 0
        return _Query(read.result_key, read.table.name, names, whole, query, projection)

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        """Builds every query now (a filter value that does not convert raises
        ``InvalidRequest`` here, before any I/O), then streams them."""
        queries = [q for q in (self._query(endpoint, r) for r in reads) if q is not None]
        return self._run(endpoint, queries)

    async def _run(
        self, endpoint: Endpoint, queries: list[_Query]
    ) -> AsyncGenerator[RowChunk, None]:
        if not queries:
            return
        client = self._client(endpoint, self._connect_timeout)
        try:
            database = client[endpoint.database_name]
            for query in queries:
                cursor = database[query.collection].find(
                    query.filter, query.projection, batch_size=self._chunk_rows
                )
                async with cursor:
                    while True:
                        documents = await self._fetch(cursor)
                        if not documents:
                            break
                        with paused_gc():
                            data = self._rows(query, documents)
                        yield RowChunk(query.result_key, data, len(documents))
                        if len(documents) < self._chunk_rows:
                            break
        finally:
            await client.close()

    async def _fetch(self, cursor: Any) -> list[dict[str, Any]]:
        try:
            async with asyncio.timeout(self._query_timeout):
                return await cursor.to_list(self._chunk_rows)  # type: ignore[no-any-return]
        except ConnectionFailure as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error
        except OperationFailure as error:
            if error.code == _AUTH_FAILED:
                raise DatasourceUnavailable("failed to connect to datasource") from error
            raise DatasourceQueryFailed() from error
        except (PyMongoError, TimeoutError) as error:
            raise DatasourceQueryFailed() from error

    def _rows(self, query: _Query, documents: list[dict[str, Any]]) -> bytes:
        names = query.names
        rows: list[dict[str, Any]] = []
        for document in documents:
            row = {name: _top_level(document.get(name)) for name in names}
            if query.whole and not document.keys() <= row.keys():
                for name, value in document.items():
                    if name not in row:
                        row[name] = _top_level(value)
                row = dict(sorted(row.items()))
            rows.append(row)
        try:
            return self._encode(rows)[1:-1]
        except (TypeError, ValueError, OverflowError) as error:
            raise DatasourceQueryFailed(
                "failed to read datasource rows: a value has no JSON form"
            ) from error
