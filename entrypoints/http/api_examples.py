"""What the OpenAPI document says about each operation beyond its handler's signature: a
description, a description of each parameter, the walk-through's own request and answers as
examples, and every status it can answer.

The examples are the ones captured from a running ``fetcher serve`` in the API clients' guide
(``docs/guides/api-clients.md``): the walk-through's connection ``local_pg`` and its job.
``complete`` applies the table to the document the handlers generate, once, when the app is
built; ``tests/unit/entrypoints/http/test_openapi.py`` checks that no operation, parameter,
request body or success answer is left without them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Parameter,
    Reference,
    RequestBody,
)

from domain import error_catalogue as catalogue

CONNECTION_ID = "01a2437e-c3f0-7286-831b-6d8d6b5a5bb1"
JOB_ID = "01a2437e-c76d-7970-bda9-7d07d725363d"
CREATED = "2026-12-04T23:58:30.896037Z"

_LOCAL_PG = {
    "configName": "local_pg",
    "type": "POSTGRESQL",
    "host": "127.0.0.1",
    "port": 5432,
    "databaseName": "test",
    "userName": "postgres",
}
"""The walk-through's connection, as sent and as answered."""
NEW_CONNECTION = {**_LOCAL_PG, "password": "unused-with-trust", "metadata": {"team": "billing"}}
CONNECTION = {
    "id": CONNECTION_ID,
    "productName": "payments",
    **_LOCAL_PG,
    "metadata": {"team": "billing"},
    "createdAt": CREATED,
    "updatedAt": CREATED,
}
MAPPED_FIELDS = {"local_pg": {"public.walkthrough_accounts": ["*"]}}
JOB_REQUEST = {
    "dataRequest": {"mappedFields": MAPPED_FIELDS},
    "metadata": {"source": "payments", "correlationId": "walkthrough-1"},
}
RESULT_PATH = f"external-data/{JOB_ID}.json"
RESULT_HMAC = "377aff78a498a7e2ca4ffe8154841460b8ac96101550e69a3f7049c826c2447c"
REQUEST_HASH = "56b91b02a45e7d97494d877fe4cde3a19eb43301cca0bd434471c4873b266425"
JOB = {
    "id": JOB_ID,
    "metadata": {"correlationId": "walkthrough-1", "source": "payments"},
    "mappedFields": MAPPED_FIELDS,
    "status": "completed",
    "resultPath": RESULT_PATH,
    "resultHmac": RESULT_HMAC,
    "requestHash": REQUEST_HASH,
    "createdAt": "2026-12-04T23:58:31.789281Z",
    "completedAt": "2026-12-04T23:58:31.8229Z",
}
_D = "e043da07" * 8
_C = "642783c7" * 8
_R = "5d9e6797" * 8
HISTORY = {
    "jobId": JOB_ID,
    "events": [
        {
            "type": "Requested",
            "version": 1,
            "timestamp": "2026-12-04T23:58:31.789281Z",
            "facts": {"request": {"mappedFields": MAPPED_FIELDS}, "request_hash": REQUEST_HASH},
            "digest": _D,
            "prevDigest": "",
        },
        {
            "type": "Claimed",
            "version": 2,
            "timestamp": "2026-12-04T23:58:31.794385Z",
            "facts": {"worker_id": "vm:6066", "attempt": 1},
            "digest": _C,
            "prevDigest": _D,
        },
        {
            "type": "ResultStored",
            "version": 3,
            "timestamp": "2026-12-04T23:58:31.8229Z",
            "facts": {"path": RESULT_PATH, "size_bytes": 218, "row_count": 2, "hmac": RESULT_HMAC},
            "digest": _R,
            "prevDigest": _C,
        },
        {
            "type": "Completed",
            "version": 4,
            "timestamp": "2026-12-04T23:58:31.8229Z",
            "facts": {"worker_id": "vm:6066", "execution_time_ms": 17},
            "digest": "c34eeede" * 8,
            "prevDigest": _R,
        },
    ],
}
SCHEMA = {
    "id": CONNECTION_ID,
    "configName": "local_pg",
    "databaseName": "test",
    "type": "POSTGRESQL",
    "tables": [
        {
            "name": "walkthrough_accounts",
            "fields": ["balance", "email", "id", "opened"],
            "columns": [
                {"name": "balance", "type": "numeric"},
                {"name": "email", "type": "text"},
                {"name": "id", "type": "integer"},
                {"name": "opened", "type": "timestamp with time zone"},
            ],
        }
    ],
}
READY = {
    "status": "healthy",
    "checks": {
        "postgres": {"status": "up", "latency_ms": 1},
        "rabbitmq": {"status": "up", "latency_ms": 2},
        "s3": {"status": "up", "latency_ms": 4},
    },
    "version": "0.1.0",
    "deployment_mode": "production",
}
NOT_READY = {
    "status": "unhealthy",
    "checks": {
        "postgres": {"status": "down", "latency_ms": 5001, "error": "connection refused"},
        "rabbitmq": {"status": "up", "latency_ms": 2},
    },
    "version": "0.1.0",
    "deployment_mode": "production",
}

_ID = (
    f"The {{0}}'s id, a UUID (400 {catalogue.INVALID_PATH_PARAMETER.code} when it is not one, "
    f"404 {catalogue.ENTITY_NOT_FOUND.code} when there is none)."
)
ID_PARAMETERS = {"connection_id": _ID.format("connection"), "job_id": _ID.format("job")}
"""How an id in a path reads, the same on every operation that takes it."""
CONNECTION_TEST_FAILED = {
    "code": catalogue.CONNECTION_TEST_FAILED.code,
    "title": "Database Connection Error",
    "message": "The adapter failed to connect to the target data source. Check credentials and "
    "network access. (connection refused)",
}
DATASOURCE_FAILED: dict[int, tuple[str, Any]] = {502: ("ErrorBody", CONNECTION_TEST_FAILED)}
"""The answer of an operation that reaches the datasource, when it fails."""

STATUSES = {
    502: "The datasource failed, not Fetcher: "
    f"{catalogue.CONNECTION_TEST_FAILED.code} (connect) or "
    f"{catalogue.SCHEMA_RETRIEVAL_FAILED.code} (discover)",
    503: "Not live (yet), or not ready: the failing check is named",
}


@dataclass(frozen=True, slots=True)
class OperationDocs:
    description: str
    parameters: dict[str, str] = field(default_factory=dict)
    """Parameter → its description (an id in the path: ``ID_PARAMETERS``)."""
    request: Any = None
    answers: dict[int, Any] = field(default_factory=dict)
    """Status → example body of that answer."""
    errors: dict[int, tuple[str, Any]] = field(default_factory=dict)
    """Statuses to document besides those the handler declares: the schema of the body and
    an example of it."""


OPERATIONS: dict[tuple[str, str], OperationDocs] = {
    ("POST", "/v1/fetcher"): OperationDocs(
        "Requests an extraction: which fields of which tables of which registered connections "
        "(by `configName`), optionally filtered. Answers 202 with the new job's id; the worker "
        "runs it and announces the outcome as `job.completed` / `job.failed`. The same request "
        "again (same fields, filters and metadata) answers 200 with the existing job.",
        request=JOB_REQUEST,
        answers={
            202: {
                "jobId": JOB_ID,
                "status": "pending",
                "createdAt": "2026-12-04T23:58:31.789281Z",
                "message": "Job created and queued for processing",
            },
            200: {
                "jobId": JOB_ID,
                "status": "completed",
                "createdAt": "2026-12-04T23:58:31.789281Z",
                "message": "Duplicate request detected - returning existing job",
            },
        },
    ),
    ("GET", "/v1/fetcher/{job_id}"): OperationDocs(
        "Reads a job, rebuilt from its own events.",
        parameters={
            "asOf": "A version (1, 2, ...) or an RFC 3339 time: the job as it was then "
            "(404 when it did not exist yet).",
        },
        answers={200: JOB},
    ),
    ("GET", "/v1/fetcher/{job_id}/events"): OperationDocs(
        "A job's event history in order, each event with its digest and the digest of the one "
        "before it (the hash chain auditors verify). Permission `fetcher:history` or "
        "`fetcher:get`.",
        answers={200: HISTORY},
    ),
    ("GET", "/v1/fetcher/{job_id}/proof"): OperationDocs(
        "A job's inclusion proof, for a tenant's auditor: its records as stored, the signed "
        "checkpoint holding its last event (without other jobs' heads) and the Merkle path to "
        "that checkpoint's `heads_root`. Check it offline with `fetcher audit verify-job`. "
        "Permission `fetcher:history` or `fetcher:get`.",
        answers={
            200: {
                "format": "fetcher-job-proof-v1",
                "jobId": JOB_ID,
                "records": [
                    {
                        "version": 1,
                        "topic": "domain.job:JobRequested",
                        "state": "base64 of the stored event, exactly as recorded",
                    }
                ],
                "checkpoint": {
                    "position": 4,
                    "count": 4,
                    "root": "9f1c0a2e" * 8,
                    "recorded_at": "2026-12-04T23:58:40.100000Z",
                    "key_id": "1.54b8f9466046d238",
                    "heads_sha256": "1b7e44d0" * 8,
                    "heads_root": "5d0c1e9a" * 8,
                    "signature": "base64 Ed25519 signature",
                },
                "inclusion": {"index": 0, "size": 2, "path": ["7a3e55c1" * 8]},
            }
        },
    ),
    ("POST", "/v1/management/connections"): OperationDocs(
        "Registers a database under the product in `X-Product-Name`. The password and TLS "
        "material are stored encrypted and never returned. A `configName` already taken is "
        f"409 {catalogue.ENTITY_CONFLICT.code}.",
        request=NEW_CONNECTION,
        answers={201: CONNECTION},
    ),
    ("GET", "/v1/management/connections"): OperationDocs(
        "Lists connections, newest first by default, paginated.",
        answers={200: {"items": [CONNECTION], "page": 1, "limit": 10, "total": 1}},
    ),
    ("GET", "/v1/management/connections/unassigned"): OperationDocs(
        "Lists the connections without a product, in the shape of the connection list.",
        answers={
            200: {"items": [{**CONNECTION, "productName": ""}], "page": 1, "limit": 10, "total": 1}
        },
    ),
    ("GET", "/v1/management/connections/{connection_id}"): OperationDocs(
        "Reads one connection (internal datasources too), without its secrets.",
        answers={200: CONNECTION},
    ),
    ("PATCH", "/v1/management/connections/{connection_id}"): OperationDocs(
        "Changes the fields given (the product cannot change here). A new password is "
        "encrypted under the newest key. "
        f"409 {catalogue.JOB_IN_PROGRESS.code} while a job of the connection runs.",
        request={"metadata": {"team": "finance"}},
        answers={
            200: {
                **CONNECTION,
                "metadata": {"team": "finance"},
                "updatedAt": "2026-12-04T23:58:31.428627Z",
            }
        },
    ),
    ("DELETE", "/v1/management/connections/{connection_id}"): OperationDocs(
        "Deletes a connection: the row is kept (soft delete) with its credentials erased. "
        f"409 {catalogue.JOB_IN_PROGRESS.code} while a job of the connection runs.",
    ),
    ("POST", "/v1/management/connections/{connection_id}/test"): OperationDocs(
        "Connects to the database and answers how long it took. "
        f"A failure is 502 {catalogue.CONNECTION_TEST_FAILED.code} "
        "with a short, secret-free cause; ten tests a minute per connection.",
        answers={200: {"status": "success", "message": "Connection successful", "latencyMs": 74}},
        errors=DATASOURCE_FAILED,
    ),
    ("GET", "/v1/management/connections/{connection_id}/schema"): OperationDocs(
        "Discovers the connection's tables and columns.",
        answers={200: SCHEMA},
        errors=DATASOURCE_FAILED,
    ),
    ("POST", "/v1/management/connections/validate-schema"): OperationDocs(
        "Checks that every datasource, table and field of a request exists, before sending "
        f"it; 422 {catalogue.SCHEMA_VALIDATION_FAILED.code} lists each one that does not.",
        request={"mappedFields": {"local_pg": {"public.walkthrough_accounts": ["id", "email"]}}},
        answers={
            200: {
                "status": "success",
                "message": "Schema validated successfully. All datasources, tables, and "
                "fields exist.",
            }
        },
    ),
    ("POST", "/v1/management/connections/{connection_id}/assign"): OperationDocs(
        "Gives a connection without a product the product in `X-Product-Name`; a product is "
        f"given once (409 {catalogue.CONNECTION_ALREADY_ASSIGNED.code} after).",
        answers={200: CONNECTION},
    ),
    ("GET", "/v1/audit/checkpoints"): OperationDocs(
        "The relay's signed checkpoints of the event log after a position, ascending; empty "
        "until the first one is recorded. Permission `fetcher:history` or `fetcher:get`.",
        parameters={
            "after": "Only checkpoints at log positions after this one (default 0).",
            "limit": "At most this many (default 20, at most 100).",
        },
        answers={
            200: {
                "checkpoints": [
                    {
                        "position": 4,
                        "count": 4,
                        "root": "9f1c0a2e" * 8,
                        "recordedAt": "2026-12-04T23:58:40.100000Z",
                        "keyId": "ed25519:1",
                        "headsSha256": "1b7e44d0" * 8,
                        "headsRoot": "5d0c1e9a" * 8,
                        "signature": "base64 Ed25519 signature over the checkpoint's lines",
                        "heads": {JOB_ID: [4, "c34eeede" * 8]},
                    }
                ]
            }
        },
    ),
    ("GET", "/health"): OperationDocs(
        "Liveness: 200 once the start-up self-probe of every dependency passed (it is "
        "repeated with backoff until it does), 503 before.",
        answers={200: {"status": "healthy"}},
        errors={503: ("Health", {"status": "unhealthy", "reason": "self-probe failed"})},
    ),
    ("GET", "/readyz"): OperationDocs(
        "Readiness: each dependency's check; 503 while one is down or the process drains.",
        answers={200: READY},
        errors={503: ("ReadinessView", NOT_READY)},
    ),
    ("GET", "/readyz/tenant/{tenant_id}"): OperationDocs(
        "A tenant's readiness in multi-tenant mode (400 in single-tenant mode, 404 for a "
        "tenant not served).",
        parameters={"tenant_id": "The tenant's id."},
        answers={200: {**READY, "tenant_id": "acme"}},
    ),
    ("GET", "/metrics"): OperationDocs(
        "Prometheus metrics in the text exposition format (see the operators' guide)."
    ),
    ("GET", "/version"): OperationDocs(
        "The service's version (the package's, or `VERSION`) and the time of the request.",
        answers={200: {"version": "0.1.0", "requestDate": "2026-12-04T23:58:34.729075Z"}},
    ),
}


def complete(document: OpenAPI) -> OpenAPI:
    """``document`` with the table above applied (in place)."""
    for path, item in (document.paths or {}).items():
        for method in ("get", "post", "put", "patch", "delete"):
            operation = getattr(item, method, None)
            docs = OPERATIONS.get((method.upper(), path))
            if operation is None or docs is None:
                continue
            _apply(operation, docs)
    return document


def _apply(operation: Operation, docs: OperationDocs) -> None:
    operation.description = operation.description or docs.description
    for parameter in operation.parameters or ():
        if isinstance(parameter, Parameter) and not parameter.description:
            name = parameter.name
            parameter.description = docs.parameters.get(name, ID_PARAMETERS.get(name))
    body = operation.request_body
    if docs.request is not None and isinstance(body, RequestBody):
        media = body.content.get("application/json")
        if media is not None:
            media.example = docs.request
    responses = operation.responses if operation.responses is not None else {}
    for status, example in docs.answers.items():
        answer = responses.get(str(status))
        if isinstance(answer, OpenAPIResponse) and answer.content:
            media = answer.content.get("application/json")
            if media is not None:
                media.example = example
    for status, (schema, example) in docs.errors.items():
        if str(status) not in responses:
            responses[str(status)] = OpenAPIResponse(
                description=STATUSES[status],
                content={
                    "application/json": OpenAPIMediaType(
                        schema=Reference(ref=f"#/components/schemas/{schema}"), example=example
                    )
                },
            )
    operation.responses = responses
