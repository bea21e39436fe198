"""The ``Tracer`` port on OpenTelemetry: spans from one ``TracerProvider``, contexts carried as
W3C trace headers (``traceparent``, ``tracestate``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from application.ports.tracer import SpanKind, TraceCarrier, Tracer

INSTRUMENTATION_NAME = "fetcher"

_KINDS = {
    "internal": trace.SpanKind.INTERNAL,
    "server": trace.SpanKind.SERVER,
    "client": trace.SpanKind.CLIENT,
    "producer": trace.SpanKind.PRODUCER,
    "consumer": trace.SpanKind.CONSUMER,
}


class OpenTelemetryTracer(Tracer):
    """Spans recorded by ``provider`` (whose processors export them). ``provider`` is also
    what the HTTP layer's instrumentation records the request spans with."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer(INSTRUMENTATION_NAME)
        self._propagator = TraceContextTextMapPropagator()

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        *,
        parent: TraceCarrier | None = None,
        kind: SpanKind = "internal",
        attributes: Mapping[str, str | int] | None = None,
    ) -> Iterator[None]:
        context = self._propagator.extract(dict(parent)) if parent else None
        with self._tracer.start_as_current_span(
            name, context=context, kind=_KINDS[kind], attributes=attributes
        ):
            yield

    def carrier(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        self._propagator.inject(headers)
        return headers
