"""One job is one trace: the POST, the dispatch, the worker's claim/plan/extract/upload and
the event publish share a trace id, carried across the work message and onto the event's
headers (the embedded default's in-process queue goes through the same envelopes as
RabbitMQ)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from uuid import UUID

from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from adapters.crypto.keys import KeyRing
from adapters.memory.connection_repository import InMemoryConnectionRepository
from adapters.memory.datasource_reader import InMemoryDatasourceReader, MemoryTable
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.result_storage import InMemoryResultStorage
from adapters.telemetry.otel_tracer import OpenTelemetryTracer
from domain.connection_input import ConnectionInput
from domain.job import JobCompleted
from domain.tenant import SINGLE_TENANT
from entrypoints.composition import Overrides, bootstrap
from entrypoints.http.app import create_app
from entrypoints.settings import Settings
from tests.support.twins import MASTER_KEY

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"


def trace_id(traceparent: str) -> str:
    return traceparent.split("-")[1]


async def test_one_job_is_one_trace_across_api_dispatch_worker_and_event(tmp_path: Path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryDatasourceReader(chunk_rows=2)
    reader.database("db.local", "pgsql").tables["accounts"] = MemoryTable(
        columns=[("id", "integer")], rows=[{"id": i} for i in range(5)]
    )
    store = InMemoryJobEventStore()
    async with bootstrap(
        Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path)}),
        overrides=Overrides(
            key_ring=KeyRing(MASTER_KEY),
            store=store,
            connections=InMemoryConnectionRepository(),
            job_index=InMemoryJobIndex(),
            reader=reader,
            storage=InMemoryResultStorage(),
            tracer=OpenTelemetryTracer(provider),
        ),
    ) as fetcher:
        await fetcher.api.connections.register(
            "payments",
            ConnectionInput(
                config_name="pgsql",
                type="POSTGRESQL",
                host="db.local",
                port=5432,
                database_name="pgsql",
                user_name="reader",
                password="pw",
            ),
            tenant=SINGLE_TENANT,
        )
        async with AsyncTestClient(create_app(fetcher.api)) as client:
            response = await client.post(
                "/v1/fetcher",
                json={
                    "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}},
                    "metadata": {"source": "payments"},
                },
                headers={"traceparent": CALLER, "X-Request-Id": "trace-req-1"},
            )
        assert response.status_code == 202
        job_id = UUID(response.json()["jobId"])
        await fetcher.relay.dispatcher.run_once()
        consuming = asyncio.create_task(fetcher.worker.consumer.run())
        for _ in range(500):
            if any(isinstance(e, JobCompleted) for e in await store.job_events(job_id)):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the job did not complete")
        await fetcher.worker.consumer.stop()
        await consuming
        await fetcher.relay.emitter.run_once()

    spans = {span.name: span for span in exporter.get_finished_spans()}
    expected = {
        "POST /v1/fetcher", "job.dispatch", "job.run", "job.claim", "job.plan", "job.extract",
        "job.upload", "job.record", "job.publish",
    }  # fmt: skip
    assert expected <= set(spans)
    assert {format(spans[name].context.trace_id, "032x") for name in expected} == {CALLER_TRACE}
    post, dispatch, run = spans["POST /v1/fetcher"], spans["job.dispatch"], spans["job.run"]
    assert post.kind is SpanKind.SERVER and post.attributes["fetcher.request_id"] == "trace-req-1"
    assert dispatch.kind is SpanKind.PRODUCER and dispatch.parent.span_id == post.context.span_id
    # the worker continued the context the work message carried
    assert run.kind is SpanKind.CONSUMER and run.parent.span_id == dispatch.context.span_id
    assert spans["job.extract"].parent.span_id == run.context.span_id
    assert spans["job.publish"].kind is SpanKind.PRODUCER

    [line] = (tmp_path / "events.jsonl").read_text().splitlines()
    headers = json.loads(line)["headers"]
    assert trace_id(headers["traceparent"]) == CALLER_TRACE
    assert headers["X-Request-Id"] == "trace-req-1"
    publish_id = format(spans["job.publish"].context.span_id, "016x")
    assert headers["traceparent"].split("-")[2] == publish_id
