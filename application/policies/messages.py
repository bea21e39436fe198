"""The bytes of the work message (reference §4.8) and of the job events (§5.3)."""

from __future__ import annotations

from application.ports.messaging import WorkOrder
from application.ports.tracer import TraceCarrier, trace_headers
from application.timefmt import rfc3339nano
from domain import gojson
from domain.job import Job, Phase
from domain.request import filters_json, thaw


def work_order_body(job: Job) -> bytes:
    """Go JSON of a map, so keys in order: ``createdAt``, ``filters`` (when there are any, each
    condition as the reference's struct encodes it), ``jobId``, ``mappedFields``, ``metadata``."""
    request = job.request
    fields = [("createdAt", gojson.encode_string(rfc3339nano(job.created_at)))]
    if request.filters:
        fields.append(("filters", filters_json(request.filters)))
    fields += [
        ("jobId", gojson.encode_string(str(job.id))),
        ("mappedFields", gojson.encode(request.mapped_fields)),
        ("metadata", gojson.encode(request.metadata)),
    ]
    return gojson.encode_ordered(fields).encode("utf-8")


def work_order(job: Job, trace_context: TraceCarrier | None = None) -> WorkOrder:
    """The work order of ``job``: its message body, the id of the request that asked for it,
    ``trace_context`` (by default the one recorded with the request) and its tenant (for the
    headers)."""
    return WorkOrder(
        job_id=job.id,
        body=work_order_body(job),
        request_id=job.request_id,
        trace_context=trace_headers(job.trace_context if trace_context is None else trace_context),
        tenant=job.tenant,
    )


def notification_body(job: Job) -> bytes:
    """``job.completed``/``job.failed`` body: a Go struct, so top-level fields keep this order."""
    metadata = dict(thaw(job.request.metadata))
    if job.phase is Phase.FAILED:
        metadata["error"] = {"message": job.error or ""}
        fields = [
            ("jobId", gojson.encode_string(str(job.id))),
            ("metadata", gojson.encode(metadata)),
            ("status", gojson.encode_string("failed")),
        ]
        return gojson.encode_ordered(fields).encode("utf-8")
    if job.phase is not Phase.COMPLETED or job.result is None or job.finished_at is None:
        raise ValueError(f"job {job.id} has not ended")
    result = job.result
    result_fields = [("path", gojson.encode_string(result.path))]
    if result.size_bytes:
        result_fields.append(("sizeBytes", str(result.size_bytes)))
    if result.row_count:
        result_fields.append(("rowCount", str(result.row_count)))
    result_fields += [
        ("format", '"json"'),
        ("hmac", gojson.encode_string(result.hmac)),
        (
            "integrity",
            gojson.encode_ordered(
                [("algorithm", '"HMAC-SHA256"'), ("signature", gojson.encode_string(result.hmac))]
            ),
        ),
        (
            "protection",
            '{"encrypted":true,"mode":"adapter-managed","appliedBy":"adapter"}',
        ),
    ]
    fields = [
        ("jobId", gojson.encode_string(str(job.id))),
        ("metadata", gojson.encode(metadata)),
        ("status", '"completed"'),
        ("result", gojson.encode_ordered(result_fields)),
    ]
    if job.execution_time_ms:
        fields.append(("executionTimeMs", str(job.execution_time_ms)))
    fields.append(("completedAt", gojson.encode_string(rfc3339nano(job.finished_at))))
    return gojson.encode_ordered(fields).encode("utf-8")
