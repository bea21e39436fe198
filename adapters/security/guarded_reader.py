"""A datasource reader that passes every dial through the host guard."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from application.connections.endpoints import TrustedEndpoint
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from application.ports.host_guard import HostGuard
from domain.connection import DatabaseType, Endpoint
from domain.schema import Schema, TableRead

# TLS modes in which the driver checks the server certificate against the host it dials.
HOSTNAME_VERIFYING_MODES = {
    DatabaseType.POSTGRESQL: frozenset({"verify-full"}),
    DatabaseType.MYSQL: frozenset({"true"}),
}


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


class GuardedDatasourceReader(DatasourceReader):
    """Checks the host of every external endpoint before ``test``, ``discover`` and ``stream``
    reach the engine adapter (``stream`` when it is first iterated, just before it dials), and
    hands the adapter the checked address as the host, so the driver dials exactly what was
    checked (asyncpg and aiomysql take an address as the host). ``prepare`` dials nothing and
    passes straight through, so a bad filter value fails when it is called, as without the
    guard. Internal datasources (``TrustedEndpoint``) are not checked.

    One case cannot be pinned through ``Endpoint``: a host *name* under a TLS mode that
    verifies the server's name (PostgreSQL ``verify-full``, MySQL ``true``). The engine
    adapters derive the TLS server name from the host they dial (asyncpg passes
    ``server_hostname=host`` to ``start_tls``), so pinning would make them verify the address
    instead of the name. For those the name is checked and then given to the driver, which
    resolves it again; a rebinding answer can then only reach the TCP connect, since the TLS
    handshake fails unless the server holds a certificate for that name from the configured CA.
    """

    def __init__(self, inner: DatasourceReader, guard: HostGuard) -> None:
        self._inner = inner
        self._guard = guard

    async def _pinned(self, endpoint: Endpoint) -> Endpoint:
        if isinstance(endpoint, TrustedEndpoint):
            return endpoint
        address = await self._guard.pin(endpoint.host, endpoint.port)
        verifying = HOSTNAME_VERIFYING_MODES.get(endpoint.type, frozenset())
        if endpoint.ssl_mode in verifying and not _is_address(endpoint.host):
            return endpoint
        return replace(endpoint, host=address)

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await self._inner.test(await self._pinned(endpoint), timeout)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        return await self._inner.discover(await self._pinned(endpoint), scope)

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]:
        return self._inner.prepare(endpoint, reads)

    async def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]:
        if not prepared.steps:
            return  # nothing to dial
        pinned = await self._pinned(endpoint)
        stream = self._inner.stream(pinned, prepared)
        async with aclosing(stream) as chunks:
            async for chunk in chunks:
                yield chunk
