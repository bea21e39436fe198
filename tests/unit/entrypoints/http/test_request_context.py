"""Following one job: its request id from the HTTP request to the work order and the event,
its log lines, the access log, and its progress while it runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient

from adapters.memory.datasource_reader import InMemoryDatasourceReader
from application.ports.job_progress import JobProgress
from domain.job import JobRequested
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT
from entrypoints.http.app import create_app
from entrypoints.logs import ContextFilter

JOB = {
    "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id", "name"]}}},
    "metadata": {"source": "payments"},
}
REFERENCE_FIELDS = {
    "id", "metadata", "mappedFields", "status", "resultPath", "resultHmac", "requestHash",
    "createdAt", "completedAt",
}  # fmt: skip
"""Those of a completed job without filters (reference §2.4.12)."""


@pytest.fixture
async def client(app):
    await app.connection()
    async with AsyncTestClient(create_app(app.fetcher.api)) as test_client:
        yield test_client


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Records at INFO and above, with the fields the service's handler adds (read
    ``logs.records`` in the test itself)."""
    caplog.set_level(logging.INFO)
    caplog.handler.addFilter(ContextFilter())
    return caplog


def fields(record: logging.LogRecord, *names: str) -> dict[str, Any]:
    return {name: getattr(record, name, None) for name in names}


async def test_the_request_id_travels_from_the_request_to_the_work_order_and_the_event(
    app,
    client,
):
    response = await client.post("/v1/fetcher", json=JOB, headers={"X-Request-Id": "req-7.a"})
    assert response.status_code == 202
    assert response.headers["x-request-id"] == "req-7.a"
    job_id = UUID(response.json()["jobId"])
    requested = (await app.store.job_events(job_id))[0]
    assert isinstance(requested, JobRequested) and requested.request_id == "req-7.a"
    history = (await client.get(f"/v1/fetcher/{job_id}/events")).json()
    assert history["events"][0]["facts"]["request_id"] == "req-7.a"

    await app.dispatcher.run_once()
    [order] = app.queue.published
    assert order.request_id == "req-7.a"
    await app.fetcher.worker.consumer.stop()  # the recorded queue is handled by hand here
    await app.run_job(order.job_id, request_id=order.request_id, tenant=SINGLE_TENANT)
    await app.emitter.run_once()
    [event] = app.publisher.published
    assert (event.status, event.request_id) == ("completed", "req-7.a")


async def test_the_request_id_is_not_part_of_the_request_hash(client):
    first = await client.post("/v1/fetcher", json=JOB, headers={"X-Request-Id": "one"})
    again = await client.post("/v1/fetcher", json=JOB, headers={"X-Request-Id": "two"})
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["jobId"] == first.json()["jobId"]
    view = (await client.get(f"/v1/fetcher/{first.json()['jobId']}")).json()
    data = JOB["dataRequest"]
    expected = ExtractionRequest.create(data["mappedFields"], None, JOB["metadata"])
    assert view["requestHash"] == expected.request_hash


@pytest.mark.parametrize("sent", [None, "has space", "x" * 129, "-leading-dash", 'a"quote'])
async def test_a_missing_or_implausible_request_id_is_replaced_by_a_new_one(client, sent):
    headers = {} if sent is None else {"X-Request-Id": sent}
    response = await client.get("/v1/fetcher/not-a-uuid", headers=headers)
    assert response.status_code == 400
    assert UUID(response.headers["x-request-id"])


async def test_every_request_gets_an_access_log_line_without_headers_or_body(client, logs):
    secret = "Bearer sekret-token-value"
    await client.post(
        "/v1/fetcher",
        json=JOB,
        headers={"X-Request-Id": "acc-1", "Authorization": secret},
    )
    await client.get("/nowhere", headers={"X-Request-Id": "acc-2"})
    await client.get("/health")
    access = [r for r in logs.records if r.name == "fetcher.access"]
    assert [fields(r, "method", "path", "status", "request_id") for r in access] == [
        {"method": "POST", "path": "/v1/fetcher", "status": 202, "request_id": "acc-1"},
        {"method": "GET", "path": "/nowhere", "status": 404, "request_id": "acc-2"},
    ]
    assert all(r.getMessage() == "http.request" for r in access)
    assert all(isinstance(r.duration_ms, int) for r in access)  # type: ignore[attr-defined]
    assert access[0].job_id  # type: ignore[attr-defined]
    for record in logs.records:
        text = repr(record.__dict__)
        assert "sekret" not in text and "accounts" not in text


async def test_the_worker_logs_start_and_end_with_rows_bytes_and_duration(app, logs):
    await app.connection()
    job = (
        await app.request_job(
            {"pgsql": {"accounts": ["*"]}}, None, {"source": "payments"}, tenant=SINGLE_TENANT
        )
    ).job
    await app.run_job(job.id, request_id="req-w", tenant=SINGLE_TENANT)
    mine = [r for r in logs.records if r.name == "application.jobs.commands.run_job"]
    assert [r.getMessage() for r in mine] == ["job.started", "job.completed"]
    assert all(r.job_id == str(job.id) for r in mine)  # type: ignore[attr-defined]
    assert all(r.request_id == "req-w" for r in mine)  # type: ignore[attr-defined]
    [done] = [r for r in mine if r.getMessage() == "job.completed"]
    stored = (await app.store.job_events(job.id))[2]
    assert done.levelno == logging.INFO
    assert fields(done, "rows", "bytes") == {"rows": 5, "bytes": stored.size_bytes}
    assert isinstance(done.duration_ms, int)  # type: ignore[attr-defined]


async def test_a_failed_job_is_logged_with_its_error(app, logs):
    app.schemas_unknown_at_submission()
    await app.connection()
    job = (
        await app.request_job(
            {"pgsql": {"nope": ["id"]}}, None, {"source": "payments"}, tenant=SINGLE_TENANT
        )
    ).job
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    [failed] = [r for r in logs.records if r.getMessage() == "job.failed"]
    assert failed.levelno == logging.INFO
    assert "nope" in failed.error  # type: ignore[attr-defined]
    assert failed.job_id == str(job.id)  # type: ignore[attr-defined]


class HeldReader:
    """The in-memory reader, holding its stream after the first chunk until ``release``."""

    def __init__(self, inner: InMemoryDatasourceReader) -> None:
        self._inner = inner
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stream(self, endpoint: Any, prepared: Any) -> AsyncIterator[Any]:
        async for chunk in self._inner.stream(endpoint, prepared):
            yield chunk
            await self.release.wait()


async def test_a_processing_job_shows_rows_and_bytes_so_far_and_a_completed_one_does_not(
    app,
    client,
    logs,
):
    reader = HeldReader(app.reader)
    app.run_job.reader = reader  # type: ignore[assignment]
    app.run_job.progress_interval = 0.02
    job_id = (await client.post("/v1/fetcher", json=JOB)).json()["jobId"]
    running = asyncio.create_task(app.run_job(UUID(job_id), tenant=SINGLE_TENANT))
    try:
        for _ in range(500):
            view = (await client.get(f"/v1/fetcher/{job_id}")).json()
            if "progress" in view:
                break
            await asyncio.sleep(0.01)
        assert view["status"] == "processing"
        assert view["progress"]["rows"] == 2  # the reader's first chunk
        assert view["progress"]["bytes"] > 0
        assert set(view["progress"]) == {"rows", "bytes", "updatedAt"}
    finally:
        reader.release.set()
        await running
    progress_lines = [r for r in logs.records if r.getMessage() == "job.progress"]
    assert progress_lines and progress_lines[0].job_id == job_id  # type: ignore[attr-defined]
    assert isinstance(progress_lines[0].rows, int)  # type: ignore[attr-defined]
    await app.fetcher.relay.projection.run_once()
    done = (await client.get(f"/v1/fetcher/{job_id}")).json()
    assert done["status"] == "completed"
    assert set(done) == REFERENCE_FIELDS


async def test_progress_of_an_earlier_claim_is_not_shown(app, client):
    job_id = UUID((await client.post("/v1/fetcher", json=JOB)).json()["jobId"])
    reader = HeldReader(app.reader)
    app.run_job.reader = reader  # type: ignore[assignment]
    running = asyncio.create_task(app.run_job(job_id, tenant=SINGLE_TENANT))
    try:
        for _ in range(500):
            if (await client.get(f"/v1/fetcher/{job_id}")).json()["status"] == "processing":
                break
            await asyncio.sleep(0.01)
        stale = JobProgress(job_id, attempt=0, rows=9, bytes=99, updated_at=app.clock.now())
        await app.job_index.record(stale)
        assert "progress" not in (await client.get(f"/v1/fetcher/{job_id}")).json()
        app.job_index.unavailable = True
        view = await client.get(f"/v1/fetcher/{job_id}")
        assert view.status_code == 200 and "progress" not in view.json()
        app.job_index.unavailable = False
    finally:
        reader.release.set()
        await running
