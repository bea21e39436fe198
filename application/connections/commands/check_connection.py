"""CheckConnection: dial a connection and report the latency (reference §2.4.6)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from uuid import UUID

from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.errors import ConnectionTestFailed, DatasourceError, ForbiddenHost, InvalidSslMode
from application.ports.datasource_reader import DatasourceReader
from application.ports.rate_limiter import RateLimiter
from domain import error_catalogue as catalogue
from domain.errors import EntityNotFound, FetcherError
from domain.tenant import Tenant

log = logging.getLogger(__name__)

TEST_TIMEOUT = 10.0


class RateLimitExceeded(FetcherError):
    entry = catalogue.CONNECTION_TEST_RATE_LIMITED

    def __init__(self, wait_seconds: float) -> None:
        seconds = max(1, math.ceil(wait_seconds))
        super().__init__(self.entry.render(seconds=seconds))
        self.retry_after = seconds


def limiter_key(connection_id: UUID, tenant: Tenant) -> str:
    """The rate limiter's key (reference §2.4.6): the connection id, prefixed with
    ``tenant:<tenantId>:`` in multi-tenant mode."""
    if tenant.is_single:
        return str(connection_id)
    return f"tenant:{tenant.id}:{connection_id}"


@dataclass(frozen=True, slots=True)
class CheckResult:
    latency_ms: int


@dataclass(slots=True)
class CheckConnection:
    """Opens, pings and closes a connection (internal datasources included) within 10 s.

    Rate limited per connection id (per tenant and id in multi-tenant mode) before anything
    else (429 FET-1043 with the wait). Errors: 404 FET-1001 for an id ``tenant`` does not
    see; FET-0414 (host guard) and FET-0413 (SSL mode) as they are; a secret sealed under a
    key version that is no longer configured names that version; any other failure is 500
    FET-1041 with the reference's text and a short secret-free cause.
    """

    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader
    limiter: RateLimiter
    timeout: float = TEST_TIMEOUT

    async def __call__(self, connection_id: UUID, *, tenant: Tenant) -> CheckResult:
        wait = await self.limiter.acquire(limiter_key(connection_id, tenant))
        if wait > 0:
            raise RateLimitExceeded(wait)
        connection = await self.directory.by_id(connection_id, tenant=tenant)
        if connection is None:
            raise EntityNotFound("connection")
        endpoint = self.endpoints.endpoint(connection)
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout + 1):
                await self.reader.test(endpoint, self.timeout)
        except (ForbiddenHost, InvalidSslMode):
            raise
        except (DatasourceError, TimeoutError) as error:
            log.info("connection %s failed its test: %s", connection.config_name, error)
            raise ConnectionTestFailed.caused_by(error) from error
        return CheckResult(latency_ms=int((time.monotonic() - started) * 1000))
