from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Literal, Protocol

SpanKind = Literal["internal", "server", "client", "producer", "consumer"]
TraceCarrier = Mapping[str, str]
"""A span context as W3C trace headers (``traceparent``, ``tracestate``)."""

TRACE_HEADERS = ("traceparent", "tracestate")


class Tracer(Protocol):
    """Spans around a job's steps, so one job's work forms one trace across processes.

    - ``span`` opens a span for the block, a child of the current span, or of ``parent``
      when one is given (a context carried in a message or in the job's history). An
      exception leaving the block marks the span as failed and propagates unchanged.
    - ``carrier`` is the current span's context as W3C trace headers, to carry in a message
      or record with a job; empty when there is no span (tracing off).
    """

    def span(
        self,
        name: str,
        *,
        parent: TraceCarrier | None = None,
        kind: SpanKind = "internal",
        attributes: Mapping[str, str | int] | None = None,
    ) -> contextlib.AbstractContextManager[None]: ...

    def carrier(self) -> dict[str, str]: ...


class NullTracer:
    """Tracing off: no spans, nothing carried."""

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        *,
        parent: TraceCarrier | None = None,
        kind: SpanKind = "internal",
        attributes: Mapping[str, str | int] | None = None,
    ) -> Iterator[None]:
        yield

    def carrier(self) -> dict[str, str]:
        return {}


NO_TRACER: Tracer = NullTracer()


def trace_headers(carrier: TraceCarrier | None) -> dict[str, str]:
    """The W3C trace headers of ``carrier``, nothing else."""
    if not carrier:
        return {}
    return {name: carrier[name] for name in TRACE_HEADERS if carrier.get(name)}
