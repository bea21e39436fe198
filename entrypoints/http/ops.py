"""Operational routes: liveness, readiness, version."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from litestar import Response, get
from litestar.di import NamedDependency

from application.timefmt import rfc3339nano
from domain.redaction import redact
from entrypoints.http.schemas import Health, VersionView
from entrypoints.roles import ApiServices

CHECK_TIMEOUT = 2.0


@get("/health", tags=["operations"], summary="Liveness")
async def health() -> Health:
    return Health(status="healthy")


async def _run_check(check: Any) -> dict[str, Any]:
    started = time.monotonic()
    try:
        await asyncio.wait_for(check(), CHECK_TIMEOUT)
    except TimeoutError:
        return {"status": "down", "error": "check timeout"}
    except Exception as error:
        return {"status": "down", "error": redact(str(error))[:512]}
    return {"status": "up", "latency_ms": int((time.monotonic() - started) * 1000)}


@get("/readyz", tags=["operations"], summary="Readiness of the event store, broker and storage")
async def readyz(services: NamedDependency[ApiServices]) -> Response[dict[str, Any]]:
    names = list(services.checks)
    results = await asyncio.gather(*(_run_check(services.checks[n]) for n in names))
    checks = dict(zip(names, results, strict=True))
    healthy = all(r["status"] == "up" for r in results)
    body = {
        "status": "healthy" if healthy else "unhealthy",
        "checks": checks,
        "version": services.version,
        "deployment_mode": "local",
    }
    return Response(body, status_code=200 if healthy else 503)


@get("/version", tags=["operations"], summary="Service version")
async def version(services: NamedDependency[ApiServices]) -> VersionView:
    return VersionView(version=services.version, requestDate=rfc3339nano(datetime.now(UTC)))
