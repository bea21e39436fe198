"""Operational routes: liveness, readiness, metrics (reference §7) and version.

The API serves them on its port; ``fetcher worker`` and ``fetcher relay`` serve the first three
on ``HEALTH_PORT`` (``create_health_app``). They depend on the process's ``Probes`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from litestar import HttpMethod, Litestar, Request, Response, get, route
from litestar.di import NamedDependency, Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath

from application.readiness import ReadinessReport
from application.timefmt import rfc3339nano
from domain.errors import Unavailable
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.schemas import (
    CheckView,
    Health,
    ReadinessView,
    TenantProbeError,
    VersionView,
)
from entrypoints.roles import ApiServices, Probes

HEALTHY = Health(status="healthy")
UNHEALTHY = Health(status="unhealthy", reason="self-probe failed")


@get("/health", tags=["operations"], summary="Liveness: the start-up self-probe passed")
async def health(probes: NamedDependency[Probes]) -> Response[Health]:
    if probes.readiness.live:
        return Response(HEALTHY, status_code=200)
    return Response(UNHEALTHY, status_code=503)


def readiness_view(report: ReadinessReport, tenant_id: str | None = None) -> ReadinessView:
    """The readiness body (reference §7.2) of ``report``; ``tenant_id`` for a tenant's."""
    return ReadinessView(
        status="healthy" if report.healthy else "unhealthy",
        checks={
            name: CheckView(
                status=check.status.value,
                latency_ms=check.latency_ms,
                tls=check.tls,
                error=check.error,
                reason=check.reason,
            )
            for name, check in report.checks.items()
        },
        version=report.version,
        deployment_mode=report.deployment_mode,
        tenant_id=tenant_id,
    )


def readiness_response(
    report: ReadinessReport, tenant_id: str | None = None
) -> Response[ReadinessView]:
    """200 with the body when every check passed, else 503."""
    return Response(readiness_view(report, tenant_id), status_code=200 if report.healthy else 503)


@get(
    "/readyz",
    tags=["operations"],
    summary="Readiness of the database, broker and storage this process uses",
)
async def readyz(probes: NamedDependency[Probes]) -> Response[ReadinessView]:
    return readiness_response(await probes.readiness.report())


@get(
    "/metrics",
    tags=["operations"],
    summary="Prometheus metrics of this process",
    media_type="text/plain",
)
async def metrics(
    request: Request[Any, Any, Any], probes: NamedDependency[Probes]
) -> Response[bytes]:
    body, content_type = probes.metrics.exposition(request.headers.get("accept", ""))
    return Response(body, media_type=content_type)


@get("/version", tags=["operations"], summary="Service version")
async def version(services: NamedDependency[ApiServices]) -> VersionView:
    return VersionView(version=services.version, requestDate=rfc3339nano(datetime.now(UTC)))


@get(
    "/readyz/tenant/{tenant_id:str}",
    tags=["operations"],
    summary="Readiness for one tenant (multi-tenant mode)",
    responses={
        400: ResponseSpec(
            TenantProbeError, description="Multi-tenant mode is disabled", generate_examples=False
        ),
        404: ResponseSpec(
            TenantProbeError,
            description="This service serves no such tenant",
            generate_examples=False,
        ),
        503: ResponseSpec(
            ReadinessView, description="A dependency is down, or draining", generate_examples=False
        ),
    },
)
async def readyz_tenant(probes: NamedDependency[Probes], tenant_id: FromPath[str]) -> Response[Any]:
    """Reference §7.3: 400 in single-tenant mode, 404 for a tenant this service does not
    serve, else the readiness of ``/readyz`` (the stores are shared by all tenants) with
    ``tenant_id``."""
    tenancy = probes.tenancy
    if not tenancy.multi_tenant:
        return Response({"error": "multi-tenant mode is disabled"}, status_code=400)
    if not tenancy.serves(tenant_id):
        return Response({"error": "tenant not found", "tenant_id": tenant_id}, status_code=404)
    return readiness_response(await probes.readiness.report(), tenant_id)


PROBE_ROUTES = (health, readyz, readyz_tenant, metrics)


def self_probe(probes: Probes) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    """The app's lifespan step for liveness: the self-probe runs once before the app serves,
    then again in the background (with backoff) until it passes."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        readiness = probes.readiness
        stop = asyncio.Event()
        retry = None
        if not await readiness.self_probe():
            retry = asyncio.create_task(readiness.probe_until_live(stop))
        try:
            yield
        finally:
            stop.set()
            if retry is not None:
                retry.cancel()
                await asyncio.gather(retry, return_exceptions=True)

    return lifespan


def create_health_app(probes: Probes, *, probe_at_start: bool = True) -> Litestar:
    """The health port of a process without the API: ``/health``, ``/readyz``, ``/metrics``.
    Without ``probe_at_start`` the app runs no self-probe (the process runs it once it has
    started)."""

    async def provide_probes() -> Probes:
        return probes

    return Litestar(
        route_handlers=list(PROBE_ROUTES),
        dependencies={"probes": Provide(provide_probes)},
        signature_namespace={"Probes": Probes},
        lifespan=[self_probe(probes)] if probe_at_start else [],
        openapi_config=None,
        logging_config=None,
    )


STARTING_MESSAGE = (
    "The service is starting and waits for its database or message broker. Please try again later."
)


@route(
    ["/", "/{path:path}"],
    http_method=list(HttpMethod),
    include_in_schema=False,
)
async def starting() -> None:
    raise Unavailable(STARTING_MESSAGE)


def create_starting_app(probes: Probes) -> Litestar:
    """What the API's port answers while the process waits for its dependencies: the probes
    (``/readyz`` reports what is down), and 503 FET-0003 in the error shape for anything
    else."""

    async def provide_probes() -> Probes:
        return probes

    return Litestar(
        route_handlers=[*PROBE_ROUTES, starting],
        dependencies={"probes": Provide(provide_probes)},
        signature_namespace={"Probes": Probes},
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=None,
        logging_config=None,
    )
