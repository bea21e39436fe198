"""Extraction job routes: thin — decode, call one use case, encode."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody

from application.queries.get_job import HistoryEntry
from application.timefmt import rfc3339nano
from domain import error_catalogue as catalogue
from domain.errors import InvalidRequest, MissingFields
from domain.job import Job
from domain.request import thaw
from entrypoints.http.auth import BEARER_REQUIREMENT
from entrypoints.http.errors import error_responses
from entrypoints.http.guards import can_get_fetcher, can_post_fetcher, can_read_history
from entrypoints.http.schemas import (
    FetcherRequest,
    JobAccepted,
    JobHistory,
    JobHistoryEntry,
    JobView,
)
from entrypoints.roles import ApiServices


def parse_id(raw: str, what: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise InvalidRequest(f"invalid {what} id", entry=catalogue.INVALID_PATH_PARAMETER) from None


def job_view(job: Job) -> JobView:
    metadata = thaw(job.request.metadata)
    if job.error is not None:
        metadata["error"] = job.error
    return JobView(
        id=str(job.id),
        metadata=metadata or None,
        mappedFields=thaw(job.request.mapped_fields),
        filters=thaw(job.request.filters) or None,
        status=job.status,
        resultPath=job.result.path if job.result and job.status == "completed" else None,
        resultHmac=job.result.hmac if job.result and job.status == "completed" else None,
        requestHash=job.request.request_hash,
        createdAt=rfc3339nano(job.created_at),
        completedAt=rfc3339nano(job.finished_at) if job.finished_at else None,
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
    )


class JobController(Controller):
    path = "/v1/fetcher"
    tags = ["jobs"]
    security = BEARER_REQUIREMENT

    @post(
        "/",
        guards=[can_post_fetcher],
        status_code=202,
        summary="Create an extraction job",
        description="202 for a new job, 200 with the existing job for a duplicate request.",
        responses={
            200: ResponseSpec(
                data_container=JobAccepted, description="Duplicate: the existing job"
            ),
            **error_responses(400, 409, 413),
        },
    )
    async def create_job(
        self, services: NamedDependency[ApiServices], data: JSONBody[FetcherRequest]
    ) -> Response[JobAccepted]:
        mapped = data.dataRequest.mappedFields if data.dataRequest else None
        if mapped is None:
            raise MissingFields(
                fields={"dataRequest.mappedFields": "dataRequest.mappedFields is a required field"}
            )
        result = await services.request_job(
            mapped, data.dataRequest.filters if data.dataRequest else None, data.metadata
        )
        job = result.job
        if result.created:
            services.on_job_recorded()
            return Response(
                JobAccepted(
                    jobId=str(job.id),
                    status=job.status,
                    createdAt=rfc3339nano(job.created_at),
                    message="Job created and queued for processing",
                ),
                status_code=202,
            )
        return Response(
            JobAccepted(
                jobId=str(job.id),
                status=job.status,
                createdAt=rfc3339nano(job.created_at),
                message="Duplicate request detected - returning existing job",
            ),
            status_code=200,
        )

    @get(
        "/{job_id:str}",
        guards=[can_get_fetcher],
        summary="Read a job, rebuilt from its own events",
        responses=error_responses(400, 404),
    )
    async def read_job(
        self, services: NamedDependency[ApiServices], job_id: FromPath[str]
    ) -> JobView:
        return job_view(await services.get_job(parse_id(job_id, "job")))

    @get(
        "/{job_id:str}/events",
        guards=[can_read_history],
        summary="A job's event history, in order, for auditors",
        responses=error_responses(400, 404),
    )
    async def read_history(
        self, services: NamedDependency[ApiServices], job_id: FromPath[str]
    ) -> JobHistory:
        parsed = parse_id(job_id, "job")
        entries = await services.get_job_history(parsed)
        return JobHistory(jobId=str(parsed), events=[history_entry(e) for e in entries])
