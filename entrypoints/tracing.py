"""Tracing from settings: an OpenTelemetry ``TracerProvider`` exporting over OTLP (gRPC or
HTTP) or to the console, wrapped as the ``Tracer`` port; or no tracer at all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection

from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)

from adapters.telemetry.otel_tracer import OpenTelemetryTracer
from application.ports.tracer import NO_TRACER, Tracer
from entrypoints.observability_settings import TracingSettings
from entrypoints.roles import Role

DEPLOYMENT_ENVIRONMENT = "deployment.environment"


def service_name(roles: Collection[Role]) -> str:
    """The reference names its Manager ``fetcher`` and its Worker ``fetcher-worker``."""
    if Role.API in roles:
        return "fetcher"
    if Role.WORKER in roles:
        return "fetcher-worker"
    return "fetcher-relay"


def _exporter(settings: TracingSettings) -> SpanExporter:
    if settings.exporter == "console":
        return ConsoleSpanExporter()
    if settings.protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return HttpSpanExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcSpanExporter,
    )

    return GrpcSpanExporter(insecure=settings.insecure)


def tracer_provider(
    settings: TracingSettings, roles: Collection[Role], version: str
) -> TracerProvider:
    """A provider for this process; ``Resource.create`` adds ``OTEL_RESOURCE_ATTRIBUTES``."""
    attributes: dict[str, str] = {
        SERVICE_NAME: settings.service_name or service_name(roles),
        SERVICE_VERSION: settings.service_version or version,
    }
    if settings.deployment_environment:
        attributes[DEPLOYMENT_ENVIRONMENT] = settings.deployment_environment
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(_exporter(settings)))
    return provider


@contextlib.asynccontextmanager
async def open_tracer(
    settings: TracingSettings,
    roles: Collection[Role],
    *,
    version: str,
) -> AsyncIterator[Tracer]:
    """The process's tracer; at exit, the spans still buffered are exported."""
    if not settings.enabled:
        yield NO_TRACER
        return
    provider = tracer_provider(settings, roles, version)
    try:
        yield OpenTelemetryTracer(provider)
    finally:
        await asyncio.to_thread(provider.shutdown)
