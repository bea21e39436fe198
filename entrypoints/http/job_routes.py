"""Extraction job routes: thin — decode, call one use case with the caller's tenant, encode."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody, QueryParameter

from application.jobs.queries.get_job import HistoryEntry
from application.ports.job_progress import JobProgress
from application.timefmt import rfc3339nano
from domain import error_catalogue as catalogue
from domain import gojson
from domain.errors import FetcherError, InvalidRequest, MissingFields
from domain.identity import Permission
from domain.job import Job
from domain.request import filters_json, thaw
from domain.tenant import Tenant
from entrypoints.http.errors import error_responses
from entrypoints.http.guards import GuardedController, needs
from entrypoints.http.list_params import invalid_parameter
from entrypoints.http.request_context import request_id_of
from entrypoints.http.schemas import (
    FetcherRequest,
    JobAccepted,
    JobHistory,
    JobHistoryEntry,
    JobProgressView,
    JobView,
)
from entrypoints.roles import ApiServices


def parse_id(raw: str, what: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise InvalidRequest(f"invalid {what} id", entry=catalogue.INVALID_PATH_PARAMETER) from None


def go_json(text: str) -> msgspec.Raw:
    """Text already encoded as Go's JSON, embedded in a response as it is."""
    return msgspec.Raw(text.encode("utf-8"))


def job_view(job: Job, progress: JobProgress | None = None) -> JobView:
    """The job as the reference returns it: the request's metadata, mapped fields and filters
    in Go's JSON form (as stored there, and as the job's events carry them), whatever form
    the client sent."""
    request = job.request
    metadata = thaw(request.metadata)
    if job.error is not None:
        metadata["error"] = job.error
    return JobView(
        id=str(job.id),
        metadata=go_json(gojson.encode(metadata)) if metadata else None,
        mappedFields=go_json(gojson.encode(request.mapped_fields)),
        filters=go_json(filters_json(request.filters)) if request.filters else None,
        status=job.status,
        resultPath=job.result.path if job.result and job.status == "completed" else None,
        resultHmac=job.result.hmac if job.result and job.status == "completed" else None,
        requestHash=job.request.request_hash,
        createdAt=rfc3339nano(job.created_at),
        completedAt=rfc3339nano(job.finished_at) if job.finished_at else None,
        progress=JobProgressView(
            rows=progress.rows, bytes=progress.bytes, updatedAt=rfc3339nano(progress.updated_at)
        )
        if progress is not None
        else None,
    )


def _accepted(job: Job, message: str, status_code: int) -> Response[JobAccepted]:
    """The answer to a job request: the new job (202), or the existing one (200)."""
    return Response(
        JobAccepted(
            jobId=str(job.id),
            status=job.status,
            createdAt=rfc3339nano(job.created_at),
            message=message,
        ),
        status_code=status_code,
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if hasattr(value, "isoformat"):
        return rfc3339nano(value)
    return value


def history_entry(entry: HistoryEntry) -> JobHistoryEntry:
    return JobHistoryEntry(
        type=entry.type,
        version=entry.version,
        timestamp=rfc3339nano(entry.timestamp),
        facts={k: _jsonable(v) for k, v in entry.facts.items()},
        digest=entry.digest,
        prevDigest=entry.prev_digest,
    )


def parse_as_of(raw: str) -> int | datetime:
    """``asOf``: a job version (a positive integer) or an RFC 3339 time with an offset."""
    text = raw.strip()
    if text.isascii() and text.isdigit():
        version = int(text)
        if version >= 1:
            return version
        raise invalid_parameter("asOf")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise invalid_parameter("asOf") from None
    if moment.tzinfo is None or "T" not in text.upper():
        raise invalid_parameter("asOf")
    return moment


class JobController(GuardedController):
    path = "/v1/fetcher"
    tags = ["jobs"]

    @post(
        "/",
        opt=needs(Permission.FETCHER_POST),
        status_code=202,
        summary="Create an extraction job",
        description="202 for a new job, 200 with the existing job for a duplicate request.",
        responses={
            200: ResponseSpec(
                data_container=JobAccepted,
                description="Duplicate: the existing job",
                generate_examples=False,
            ),
            **error_responses(400, 409, 413, 422),
        },
    )
    async def create_job(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        data: JSONBody[FetcherRequest],
        request: Request[Any, Any, Any],
    ) -> Response[JobAccepted]:
        mapped = data.dataRequest.mappedFields if data.dataRequest else None
        if mapped is None:
            raise MissingFields(
                fields={"dataRequest.mappedFields": "dataRequest.mappedFields is a required field"}
            )
        result = await services.request_job(
            mapped,
            data.dataRequest.filters if data.dataRequest else None,
            data.metadata,
            request_id=request_id_of(request),
            tenant=tenant,
        )
        if result.created:
            return _accepted(result.job, "Job created and queued for processing", 202)
        return _accepted(result.job, "Duplicate request detected - returning existing job", 200)

    @get(
        "/{job_id:str}",
        opt=needs(Permission.FETCHER_GET),
        summary="Read a job, rebuilt from its own events",
        description="While the job is processing, `progress` shows the rows and bytes "
        "written so far (reported every few seconds). With `asOf` (a version, or an RFC 3339 "
        "time), the job as it was then, rebuilt from its events up to it (404 if it did not "
        "exist yet).",
        responses=error_responses(400, 404),
    )
    async def read_job(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        job_id: FromPath[str],
        as_of: Annotated[str | None, QueryParameter(name="asOf", required=False)] = None,
    ) -> JobView:
        parsed = parse_id(job_id, "job")
        if as_of is not None:
            job = await services.get_job.as_of(parsed, parse_as_of(as_of), tenant=tenant)
            return job_view(job)
        reading = await services.get_job.with_progress(parsed, tenant=tenant)
        return job_view(reading.job, reading.progress)

    @get(
        "/{job_id:str}/proof",
        opt=needs(Permission.FETCHER_HISTORY),
        summary="A job's inclusion proof, for a tenant's auditor",
        description="The job's records as stored (base64), the signed checkpoint that holds "
        "its last event (without the other jobs' heads) and the Merkle path from the job's "
        "head to the checkpoint's signed `heads_root`. `fetcher audit verify-job --proof FILE "
        "--public-key KEY` checks it offline. `checkpoint` is null until the relay records one "
        "that holds the job's last event.",
        responses=error_responses(400, 404),
    )
    async def read_proof(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        job_id: FromPath[str],
    ) -> dict[str, Any]:
        parsed = parse_id(job_id, "job")
        if services.prove_job is None:
            await services.get_job(parsed, tenant=tenant)  # the caller's job, or 404
            raise FetcherError(entry=catalogue.NOT_FOUND)  # no audit trail to prove against
        return (await services.prove_job(parsed, tenant=tenant)).to_json()

    @get(
        "/{job_id:str}/events",
        opt=needs(Permission.FETCHER_HISTORY),
        summary="A job's event history, in order, for auditors",
        responses=error_responses(400, 404),
    )
    async def read_history(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        job_id: FromPath[str],
    ) -> JobHistory:
        parsed = parse_id(job_id, "job")
        entries = await services.get_job_history(parsed, tenant=tenant)
        return JobHistory(jobId=str(parsed), events=[history_entry(e) for e in entries])
