"""MongoDB datasource reader on pymongo's async client: connection test, discovery by sampling,
streamed extraction with projection and typed filters.

Connection (reference §3.2-3.3): host and port, credentials, ``authSource``
(``metadata.authSource``, default ``admin``), ``directConnection`` (``metadata.directConnection``
= ``"true"``) and TLS are client keyword arguments, never pasted into a URI. TLS modes:
``true``/``enable`` verify the server (against ``ssl.ca`` when given, else the system store),
``insecure`` encrypts without verifying, ``disable``/``false``/none use no TLS. The driver reads
CA and client certificates from files only: they are written to a private temporary folder, read
when the client is built, and removed at once.

Discovery: every collection (views and ``system.*`` left out) with its top-level fields, found by
sampling as the reference does (the first 1,000 documents, or a ``$sample`` of 1,000-10,000 in
larger collections, plus a ``$sample`` of 50); each field gets the BSON type of its sampled values
as ``Column.data_type`` (``objectId``, ``string``, ``int``, ``long``, ``double``, ``decimal``,
``bool``, ``date``, ``object``, ``array``, ``binData``, ``uuid``, ``timestamp``, ``regex``,
``null``...; numbers of several kinds are given the widest, other mixes are ``mixed``). Fields
come in first-seen order, ``_id`` first.

Extraction: the requested fields are projected (``_id`` only when asked for); when every discovered
field is asked for (the ``["*"]`` wildcard) documents come whole, with the fields the sample missed.
Documents stream in batches of ``chunk_rows``. Every row has every requested field (``null`` when
the document lacks it). Filters: ``adapters.datasources.mongo_filters``.

BSON values in the result (otherwise as ``adapters.datasources.encoding``):

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
import os
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.codec_options import DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from adapters.datasources.encoding import paused_gc
from adapters.datasources.mongo_filters import mongo_filter
from application.errors import (
    DatasourceError,
    DatasourceQueryFailed,
    DatasourceUnavailable,
    InvalidSslMode,
)
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import Column, Schema, Table, TableRead

SYSTEM_NAMES = frozenset({"admin", "local", "config"})
FIRST_DOCUMENTS = 1_000
SAMPLE_ABOVE = 10_000
EXTRA_SAMPLE = 50
_AUTH_FAILED = 18
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


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


@dataclass(frozen=True, slots=True)
class _TlsFiles:
    ca: str | None
    cert_key: str | None


def tls_options(endpoint: Endpoint, files: _TlsFiles | None = None) -> dict[str, Any]:
    """Client keyword arguments for the endpoint's SSL mode (``files``: where the CA and the
    client certificate were written)."""
    mode = endpoint.ssl_mode
    if mode in ("", "disable", "false"):
        return {}
    if mode not in ("true", "enable", "insecure"):
        raise InvalidSslMode(mode)
    options: dict[str, Any] = {"tls": True}
    if mode == "insecure":
        options["tlsInsecure"] = True
    if files is not None and files.ca is not None:
        options["tlsCAFile"] = files.ca
    if files is not None and files.cert_key is not None:
        options["tlsCertificateKeyFile"] = files.cert_key
    return options


def client_options(
    endpoint: Endpoint, timeout: float, files: _TlsFiles | None = None
) -> dict[str, Any]:
    """Everything ``AsyncMongoClient`` is built with, credentials as separate arguments."""
    host = endpoint.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    timeout_ms = max(1, int(timeout * 1000))
    options: dict[str, Any] = {
        "host": host,
        "port": endpoint.port,
        "appname": "fetcher",
        "serverSelectionTimeoutMS": timeout_ms,
        "connectTimeoutMS": timeout_ms,
        "tz_aware": True,
        "uuidRepresentation": "standard",
        "datetime_conversion": DatetimeConversion.DATETIME_AUTO,
        "directConnection": _flag(endpoint.options.get("directConnection")),
        "maxPoolSize": 4,
    }
    if endpoint.user_name:
        source = endpoint.options.get("authSource")
        options["username"] = endpoint.user_name
        options["password"] = endpoint.password
        options["authSource"] = source if isinstance(source, str) and source else "admin"
    options.update(tls_options(endpoint, files))
    return options


@contextmanager
def _tls_files(endpoint: Endpoint) -> Iterator[_TlsFiles | None]:
    if endpoint.ssl_mode in ("", "disable", "false") or not (endpoint.ssl_ca or endpoint.ssl_cert):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="fetcher-tls-") as folder:

        def write(name: str, text: str) -> str:
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            return path

        ca = write("ca.pem", endpoint.ssl_ca) if endpoint.ssl_ca else None
        cert_key = None
        if endpoint.ssl_cert:
            pem = endpoint.ssl_cert.rstrip("\n") + "\n" + (endpoint.ssl_key or "")
            cert_key = write("client.pem", pem)
        yield _TlsFiles(ca=ca, cert_key=cert_key)


def new_client(endpoint: Endpoint, timeout: float) -> AsyncMongoClient[dict[str, Any]]:
    """A client for the endpoint; certificate files exist only while it is built."""
    with _tls_files(endpoint) as files:
        return AsyncMongoClient(**client_options(endpoint, timeout, files))


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


class _Fields:
    """Top-level field names in first-seen order (``_id`` first) and their value types."""

    def __init__(self) -> None:
        self.types: dict[str, set[str]] = {"_id": set()}

    def add(self, document: Mapping[str, Any]) -> None:
        for name, value in document.items():
            self.types.setdefault(name, set()).add(bson_type(value))

    def columns(self) -> tuple[Column, ...]:
        found = {name: types for name, types in self.types.items() if types}
        return tuple(Column(name, field_type(types)) for name, types in found.items())


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


class MongoReader(DatasourceReader):
    """Reads MongoDB datasources. Holds no client between calls."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        discover_timeout: float = 30.0,
        query_timeout: float = 120.0,
        chunk_rows: int = 10_000,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._discover_timeout = discover_timeout
        self._query_timeout = query_timeout
        self._chunk_rows = chunk_rows
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
                        return await self._sample(database[name], name)

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

    async def _sample(self, collection: Any, name: str) -> Table:
        fields = _Fields()
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
