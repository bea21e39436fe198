"""Datasource connections kept open between jobs: one bounded pool per stored connection version.

A pool belongs to one key: the endpoint's ``ConnectionIdentity`` (tenant, connection id,
connection version) and the host and port it dials (the address the SSRF guard pinned). So a
connection is never shared between tenants, and a changed password, host or TLS setting (which
comes with a new connection version) never reuses a connection opened with the old one: the
first use of a new version retires the pools of the connection's other versions. Endpoints
without an identity (a connection tested before it is stored) get a connection of their own,
closed after use.

Each pool holds at most ``size`` connections, opens them on demand and closes those idle for
``idle_seconds``; a whole pool idle that long (no lease, no use) is retired, and ``aclose``
retires every pool (at shutdown). Retiring waits, in the background, for leased connections to
come back. ``size`` 0 turns pooling off: every use connects and closes, as without this module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from domain.connection import ConnectionIdentity, Endpoint
from domain.errors import FetcherError

C = TypeVar("C")
P = TypeVar("P", bound="Pool[Any]")


class Pool(Protocol[C]):  # type: ignore[misc]
    """What asyncpg's pool and ``SimplePool`` both offer."""

    def acquire(self) -> AbstractAsyncContextManager[C]: ...


PoolKey = tuple[ConnectionIdentity, str, int]


def pool_key(endpoint: Endpoint) -> PoolKey | None:
    """The key an endpoint's connections are pooled under; None: never pooled."""
    if endpoint.identity is None:
        return None
    return (endpoint.identity, endpoint.host, endpoint.port)


@dataclass(slots=True)
class _Entry(Generic[P]):
    pool: P
    leases: int = 0
    used: float = field(default_factory=time.monotonic)


class ConnectionPools(Generic[P, C]):
    """The pools of one engine in one process.

    ``open_pool(endpoint, size, idle_seconds)`` creates a pool (without connecting, or failing
    as ``connect`` would); ``close_pool`` closes one, waiting for leased connections.
    ``connect``/``close`` serve endpoints that are not pooled. ``failure`` turns an error raised
    while a connection is being obtained into the engine's error (a ``FetcherError`` passes).
    """

    def __init__(
        self,
        *,
        open_pool: Callable[[Endpoint, int, float], Awaitable[P]],
        close_pool: Callable[[P], Coroutine[Any, Any, None]],
        connect: Callable[[Endpoint], Awaitable[C]],
        close: Callable[[C], Awaitable[None]],
        failure: Callable[[BaseException], FetcherError],
        size: int = 4,
        idle_seconds: float = 60.0,
    ) -> None:
        self._open_pool = open_pool
        self._close_pool = close_pool
        self._connect = connect
        self._close = close
        self._failure = failure
        self._size = size
        self._idle = idle_seconds
        self._pools: dict[PoolKey, _Entry[P]] = {}
        self._opening: dict[PoolKey, asyncio.Lock] = {}
        self._retiring: set[asyncio.Task[None]] = set()

    @property
    def keys(self) -> frozenset[PoolKey]:
        """The keys of the open pools (for tests and metrics)."""
        return frozenset(self._pools)

    @asynccontextmanager
    async def connection(self, endpoint: Endpoint) -> AsyncIterator[C]:
        """A connection to ``endpoint`` for the duration of the block: leased from its pool, or
        opened and closed around the block when the endpoint is not pooled."""
        key = pool_key(endpoint)
        if key is None or self._size <= 0:
            connection = await self._connect(endpoint)
            try:
                yield connection
            finally:
                await self._close(connection)
            return
        entry = await self._entry(key, endpoint)
        entry.leases += 1
        try:
            try:
                lease = entry.pool.acquire()
                connection = await lease.__aenter__()
            except FetcherError:
                raise
            except Exception as error:
                raise self._failure(error) from error
            try:
                yield connection
            except BaseException as error:
                if not await lease.__aexit__(type(error), error, error.__traceback__):
                    raise
            else:
                await lease.__aexit__(None, None, None)
        finally:
            entry.leases -= 1
            entry.used = time.monotonic()

    async def _entry(self, key: PoolKey, endpoint: Endpoint) -> _Entry[P]:
        self._sweep(key)
        entry = self._pools.get(key)
        if entry is not None:
            return entry
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            entry = self._pools.get(key)
            if entry is None:
                try:
                    pool = await self._open_pool(endpoint, self._size, self._idle)
                except FetcherError:
                    raise
                except Exception as error:
                    raise self._failure(error) from error
                entry = self._pools[key] = _Entry(pool)
        self._opening.pop(key, None)
        return entry

    def _sweep(self, wanted: PoolKey) -> None:
        """Retires the pools of ``wanted``'s connection at other versions or addresses, and
        every pool idle for longer than ``idle_seconds``."""
        identity = wanted[0]
        now = time.monotonic()
        for key, entry in list(self._pools.items()):
            same_connection = (
                key[0].tenant == identity.tenant and key[0].connection_id == identity.connection_id
            )
            stale = same_connection and key != wanted
            idle = entry.leases == 0 and now - entry.used > self._idle
            if stale or idle:
                self._retire(key)

    def _retire(self, key: PoolKey) -> None:
        entry = self._pools.pop(key)
        task: asyncio.Task[None] = asyncio.create_task(self._close_pool(entry.pool))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def aclose(self) -> None:
        """Retires every pool and waits until they are closed."""
        for key in list(self._pools):
            self._retire(key)
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)


class SimplePool(Generic[C]):
    """A bounded pool over a driver's own connect and close, for drivers whose pool cannot open
    the connections the engine needs (aiomysql's pool cannot take a connection class). At most
    ``size`` connections are leased at once; a returned one waits idle (newest first) and is
    closed when found idle for longer than ``idle_seconds``. A lease that ends with an error
    (or is abandoned) ``drop``s its connection instead of returning it, since its session may
    be in any state. After ``close``, idle connections are closed and leased ones are closed
    when they come back."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[C]],
        close: Callable[[C], Awaitable[None]],
        drop: Callable[[C], None],
        *,
        size: int,
        idle_seconds: float,
    ) -> None:
        self._connect = connect
        self._close = close
        self._drop = drop
        self._slots = asyncio.Semaphore(size)
        self._idle_seconds = idle_seconds
        self._idle: list[tuple[C, float]] = []
        self._closed = False

    def acquire(self) -> AbstractAsyncContextManager[C]:
        return self._lease()

    @asynccontextmanager
    async def _lease(self) -> AsyncIterator[C]:
        async with self._slots:
            connection = await self._take()
            try:
                yield connection
            except BaseException:
                self._drop(connection)
                raise
            if self._closed:
                await self._close(connection)
            else:
                self._idle.append((connection, time.monotonic()))

    async def _take(self) -> C:
        now = time.monotonic()
        while self._idle:
            connection, since = self._idle.pop()
            if now - since <= self._idle_seconds:
                return connection
            await self._close(connection)
        return await self._connect()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            await self._close(connection)
