"""Following one job across `fetcher api`, `fetcher worker` and `fetcher relay`: one trace
exported over OTLP to a local receiver, JSON log lines that one request id ties together,
and that id and the trace on the job's event."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aio_pika
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.e2e.conftest import (
    MASTER_KEY,
    PG_ADMIN,
    RABBIT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    SOURCE_ROWS,
    Processes,
    base_env,
    create_database,
    drop_database,
    free_port,
    pg_url,
)
from tests.e2e.test_job_flow import next_event, register, submit
from tests.integration.conftest import require_listening


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on loopback keeping every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.keep(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def keep(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            service=attributes.get("service.name", ""),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                        )
                    )

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as otlp:
        yield otlp


@pytest.fixture(scope="module")
def traced(
    run_id: str, tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver
) -> Iterator[Processes]:
    """The three roles as processes, tracing to ``receiver`` and logging JSON."""
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    store_db = f"fetcher_e2e_obs_{run_id}"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("obs-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=f"fetcher.e2e.{run_id}.obs.queue",
        RABBITMQ_JOB_EVENTS_EXCHANGE=f"fetcher.e2e.{run_id}.obs.events",
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-{run_id}-obs/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
        LOG_FORMAT="json",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("obs-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    for role in ("api", "worker", "relay"):
        processes.start(role)
    try:
        processes.wait_healthy()
        yield processes
    finally:
        processes.stop()
        asyncio.run(drop_database(store_db))


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)  # every line a process logs is one JSON object
        assert {"time", "level", "logger", "event"} <= set(record), line
        lines.append(record)
    return lines


async def test_one_job_is_one_trace_and_one_request_id_across_the_three_processes(
    traced: Processes, receiver: OtlpReceiver, source_database: str, run_id: str
):
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        exchange = await channel.get_exchange(traced.env["RABBITMQ_JOB_EVENTS_EXCHANGE"])
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(exchange, routing_key="job.*")
        register(traced.api_url, source_database, "obs_pg")
        request_id = f"e2e-obs-{run_id}"
        job_id = submit(
            traced.api_url,
            {"obs_pg": {"public.accounts": ["id"]}},
            "obs",
            headers={"X-Request-Id": request_id},
        )
        message = await next_event(queue, job_id, traced)
    finally:
        await connection.close()
    assert message.routing_key == "job.completed"
    assert message.headers["X-Request-Id"] == request_id
    trace_id = str(message.headers["traceparent"]).split("-")[1]

    wanted = {
        ("fetcher", "POST /v1/fetcher"),
        ("fetcher-relay", "job.dispatch"),
        ("fetcher-worker", "job.run"),
        ("fetcher-worker", "job.claim"),
        ("fetcher-worker", "job.extract"),
        ("fetcher-worker", "job.upload"),
        ("fetcher-relay", "job.publish"),
    }
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        mine = [s for s in receiver.spans if s.trace_id == trace_id]
        if wanted <= {(s.service, s.name) for s in mine}:
            break
        await asyncio.sleep(0.1)
    else:
        seen = sorted({(s.service, s.name, s.trace_id) for s in receiver.spans})
        raise AssertionError(f"spans of trace {trace_id} missing; received {seen}")
    by_name = {s.name: s for s in mine}
    assert by_name["job.run"].parent_id == by_name["job.dispatch"].span_id

    logs = {role: json_lines(traced.logs / f"{role}.log") for role in ("api", "worker", "relay")}
    of_job = {role: [r for r in lines if r.get("job_id") == job_id] for role, lines in logs.items()}
    for role, lines in of_job.items():
        assert lines, f"no log line of the job in the {role} log"
        assert {r.get("request_id") for r in lines} == {request_id}, role
    events = {role: {r["event"]: r for r in lines} for role, lines in of_job.items()}
    access = events["api"]["http.request"]
    assert (access["method"], access["path"], access["status"]) == ("POST", "/v1/fetcher", 202)
    assert "job.requested" in events["api"]
    started, completed = events["worker"]["job.started"], events["worker"]["job.completed"]
    assert started["level"] == completed["level"] == "INFO"
    assert completed["rows"] == SOURCE_ROWS and completed["bytes"] > 0
    assert isinstance(completed["duration_ms"], int)
    assert completed["trace_id"] == trace_id
    assert {"job.dispatched", "job.event.published"} <= set(events["relay"])

    view = httpx.get(f"{traced.api_url}/v1/fetcher/{job_id}").json()
    assert view["status"] == "completed" and "progress" not in view
