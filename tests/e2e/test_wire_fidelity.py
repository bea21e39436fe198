"""What a client or consumer written against the Go reference sees, over real processes.

- Every AMQP header of a work message and of both events goes out with the reference's field
  type (§4.8, §5.2), read from the raw frames.
- A job read back with ``GET /v1/fetcher/{id}`` carries the same metadata bytes as its event:
  Go's form (§4.9), whatever form the client sent.
- The reference's refusals (§2.2.2, §2.4.1, §3.1), and the job requests this service refuses at
  once where the reference answers 202 and later ``job.failed`` (listed in the README).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aio_pika
import httpx
import pytest

from domain import gojson
from tests.e2e.conftest import (
    MASTER_KEY,
    RABBIT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    Processes,
    base_env,
    create_database,
    drop_database,
    free_port,
    pg_url,
    table_gone_before_the_worker_reads,
)
from tests.e2e.test_job_flow import PRODUCT, next_event, register
from tests.integration.amqp_frames import (
    EVENT_TYPES,
    WORK_MESSAGE_TYPES,
    field_types,
    raw_header_tables,
)

JSON = {"Content-Type": "application/json"}
RAW_METADATA = (
    b'{"source":"payments","n":3.0,"big":1e21,"precise":9007199254740993,'
    b'"tiny":0.0000001,"nested":{"z":1,"a":[2.50,"<&>"]}}'
)
GO_METADATA = (
    b'{"big":1e+21,"n":3,"nested":{"a":[2.5,"\\u003c\\u0026\\u003e"],"z":1},'
    b'"precise":9007199254740992,"source":"payments","tiny":1e-7}'
)
"""``RAW_METADATA`` as the reference decodes, stores, returns and publishes it (§4.9)."""


def raw_job(mapped: bytes) -> bytes:
    return b'{"dataRequest":{"mappedFields":' + mapped + b'},"metadata":' + RAW_METADATA + b"}"


def submit_raw(processes: Processes, body: bytes) -> str:
    response = httpx.post(
        f"{processes.api_url}/v1/fetcher", content=body, headers={**processes.headers, **JSON}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


def read_job(processes: Processes, job_id: str) -> httpx.Response:
    response = httpx.get(f"{processes.api_url}/v1/fetcher/{job_id}", headers=processes.headers)
    assert response.status_code == 200, response.text
    return response


async def wait_terminal(processes: Processes, job_id: str, timeout: float = 60.0) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = read_job(processes, job_id)
        if response.json()["status"] in ("completed", "failed"):
            return response.content
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end within {timeout}s:\n{processes.tail()}")


@pytest.fixture
async def wire_events(production: Processes) -> AsyncIterator[aio_pika.abc.AbstractQueue]:
    connection = await aio_pika.connect(RABBIT)
    channel = await connection.channel()
    exchange = await channel.get_exchange(production.env["RABBITMQ_JOB_EVENTS_EXCHANGE"])
    queue = await channel.declare_queue(exclusive=True)
    await queue.bind(exchange, routing_key="job.*")
    yield queue
    await connection.close()


# --- headers on the wire, and GET agreeing with the event ----------------------------------


@pytest.mark.parametrize(
    ("table", "status"), [("accounts", "completed"), ("dropped_after_submission", "failed")]
)
async def test_event_headers_have_the_reference_types_and_get_agrees_with_the_event(
    production: Processes, source_database: str, wire_events, table: str, status: str
):
    name = f"wire_{status}"
    register(production.api_url, source_database, name, production.headers)

    def mapped(table: str) -> bytes:
        return b'{"' + name.encode() + b'":{"public.' + table.encode() + b'":["id","email"]}}'

    if status == "completed":
        job_id = submit_raw(production, raw_job(mapped(table)))
    else:  # a table dropped after submission: the worker fails the job
        async with table_gone_before_the_worker_reads(production, source_database) as gone:
            job_id = submit_raw(production, raw_job(mapped(gone)))

    with raw_header_tables() as seen:
        message = await next_event(wire_events, job_id, production)

    assert message.routing_key == f"job.{status}"
    assert field_types(seen, "ce-id", f"fetcher.job.{status}.{job_id}") == EVENT_TYPES
    job = await wait_terminal(production, job_id)
    if status == "completed":
        assert b'"metadata":' + GO_METADATA + b',"status":"completed"' in message.body
        assert b'"metadata":' + GO_METADATA + b',"mappedFields":' in job
    else:
        # metadata.error: an object in the event, a string in the job (reference §5.3, §2.4.12)
        error = gojson.encode_string(json.loads(job)["metadata"]["error"]).encode()
        head, rest = b'{"big":1e+21,', GO_METADATA.removeprefix(b'{"big":1e+21,')
        event_metadata = head + b'"error":{"message":' + error + b"}," + rest
        job_metadata = head + b'"error":' + error + b"," + rest
        assert b'"metadata":' + event_metadata + b',"status":"failed"}' in message.body
        assert b'"metadata":' + job_metadata + b',"mappedFields":' in job


@contextlib.contextmanager
def api_and_relay(
    run_id: str, tmp_path_factory: pytest.TempPathFactory, store_db: str
) -> Iterator[Processes]:
    """``fetcher api`` and ``fetcher relay`` without a worker: work orders stay queued."""
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("wire-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=f"fetcher.wire.{run_id}.queue",
        RABBITMQ_JOB_EVENTS_EXCHANGE=f"fetcher.wire.{run_id}.events",
        STREAMING_CLOUDEVENTS_SOURCE="//lerian.fetcher/worker",
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"wire-{run_id}/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("wire-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    for role in ("api", "relay"):
        processes.start(role)
    try:
        processes.wait_healthy()
        yield processes
    finally:
        processes.stop()


async def _queued_message(queue_name: str, job_id: str, timeout: float = 30.0):
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, passive=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = await queue.get(no_ack=True, fail=False)
            if message is not None and message.headers.get("jobId") == job_id:
                return message
            await asyncio.sleep(0.1)
        raise AssertionError(f"no work message for job {job_id} on {queue_name}")
    finally:
        with contextlib.suppress(Exception):
            cleanup = await connection.channel()
            await cleanup.queue_delete(queue_name)
            await cleanup.exchange_delete(queue_name.replace(".queue", ".events"))
        await connection.close()


async def test_work_message_headers_have_the_reference_types_and_its_metadata_go_form(
    run_id: str, tmp_path_factory: pytest.TempPathFactory, source_database: str
):
    store_db = f"fetcher_e2e_wire_{run_id}"
    await create_database(store_db)
    try:
        with api_and_relay(run_id, tmp_path_factory, store_db) as processes:
            register(processes.api_url, source_database, "wire_work")
            job_id = submit_raw(processes, raw_job(b'{"wire_work":{"accounts":["id"]}}'))
            with raw_header_tables() as seen:
                message = await _queued_message(
                    processes.env["RABBITMQ_FETCHER_WORK_QUEUE"], job_id
                )
            assert field_types(seen, "jobId", job_id) == WORK_MESSAGE_TYPES
            assert message.body.endswith(b',"metadata":' + GO_METADATA + b"}")
            assert (
                b'"metadata":' + GO_METADATA + b',"mappedFields":'
                in read_job(processes, job_id).content
            )
    finally:
        await drop_database(store_db)


# --- the reference's refusals --------------------------------------------------------------

TYPES = "[ORACLE SQL_SERVER POSTGRESQL MONGODB MYSQL]"
CONNECTION: dict[str, Any] = {
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "app",
    "userName": "reader",
    "password": "secret",
}


def post_connection(processes: Processes, body: bytes | dict[str, Any]) -> httpx.Response:
    headers = {**processes.headers, "X-Product-Name": PRODUCT, **JSON}
    url = f"{processes.api_url}/v1/management/connections"
    if isinstance(body, bytes):
        return httpx.post(url, content=body, headers=headers)
    return httpx.post(url, json=body, headers=headers)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def refused(response: httpx.Response, code: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


@pytest.mark.parametrize(
    ("changes", "code", "title", "fields"),
    [
        ({"configName": "ab"}, "FET-0001", "Bad Request",
         {"config_name": "config name must be between 3 and 100 characters"}),
        ({"configName": "a" * 101}, "FET-0001", "Bad Request",
         {"config_name": "config name must be between 3 and 100 characters"}),
        ({"configName": "no spaces!"}, "FET-0402", "Missing Fields in Request",
         {"config_name": "config name can only contain alphanumeric characters, underscores, "
                         "and hyphens"}),
    ],
)  # fmt: skip
def test_model_rules_answer_with_stored_names_and_the_connection_entity(
    production: Processes, changes, code, title, fields
):
    body = refused(post_connection(production, {**CONNECTION, **changes}), code)
    assert (body["title"], body["fields"], body["entityType"]) == (title, fields, "connection")


@pytest.mark.parametrize(
    ("changes", "code", "fields"),
    [
        ({"type": "postgresql"}, "FET-0001", {"type": f"type must be one of {TYPES}"}),
        ({"type": "UNSUPPORTED_DB"}, "FET-0001", {"type": f"type must be one of {TYPES}"}),
        ({"port": 0}, "FET-0402", {"port": "port is a required field"}),
        ({"port": None}, "FET-0402", {"port": "port is a required field"}),
        ({"port": -1}, "FET-0001", {"port": "port must be 1 or greater"}),
        ({"port": 65536}, "FET-0001", {"port": "port must be 65535 or less"}),
        ({"password": None}, "FET-0402", {"password": "password is a required field"}),
        ({"databaseName": ""}, "FET-0402", {"databaseName": "databaseName is a required field"}),
        ({"userName": None}, "FET-0402", {"userName": "userName is a required field"}),
    ],
)
def test_request_rules_answer_with_sent_names_and_no_entity(
    production: Processes, changes, code, fields
):
    sent = {"configName": unique("e2e-rule"), **CONNECTION, **changes}
    body = refused(
        post_connection(production, {k: v for k, v in sent.items() if v is not None}), code
    )
    assert body["fields"] == fields and "entityType" not in body


@pytest.mark.parametrize("port", [b'"5432"', b"5432.0", b"5.432e3"])
def test_a_port_go_cannot_decode_is_an_unparsable_body(production: Processes, port: bytes):
    body = (
        b'{"configName":"' + unique("e2e-port").encode() + b'","type":"POSTGRESQL",'
        b'"host":"db.example.com","port":' + port + b',"databaseName":"app",'
        b'"userName":"reader","password":"secret"}'
    )
    error = refused(post_connection(production, body), "FET-0001")
    # The reference's code, title and message, then where and what (a client matching the
    # reference's message by prefix still matches).
    assert error["title"] == "Invalid payload"
    assert error["message"].startswith("unable to parse request body: port: expected an integer")
    assert set(error["fields"]) == {"port"}


def test_a_body_that_is_not_json_is_an_unparsable_body(production: Processes):
    response = httpx.post(
        f"{production.api_url}/v1/fetcher",
        content=raw_job(b'{"x":{"t":["a"]}}'),
        headers={**production.headers, "Content-Type": "text/plain"},
    )
    error = refused(response, "FET-0001")
    assert error["title"] == "Invalid payload"
    assert error["message"] == (
        "unable to parse request body: the body must be JSON sent with the header "
        "Content-Type: application/json"
    )


def test_the_reference_boundaries_are_accepted(production: Processes):
    for changes in ({"configName": "abc", "port": 1}, {"configName": "a" * 100, "port": 65535}):
        response = post_connection(production, {**CONNECTION, **changes})
        assert response.status_code == 201, response.text
        deleted = httpx.delete(
            f"{production.api_url}/v1/management/connections/{response.json()['id']}",
            headers=production.headers,
        )
        assert deleted.status_code == 204


def _job(mapped: dict[str, Any], filters: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"mappedFields": mapped}
    if filters is not None:
        request["filters"] = filters
    return {"dataRequest": request, "metadata": {"source": PRODUCT}}


ON_ID = "filter on 'pg.t.id'"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_job({"pg": {f"t{n}": ["id"] for n in range(21)}}),
         "maximum 20 tables allowed per datasource, got 21 for 'pg'"),
        (_job({"pg": {"t": [f"f{n}" for n in range(51)]}}),
         "maximum 50 fields allowed per table, got 51 for 'pg.t'"),
        (_job({"pg": {"t": ["id"]}}, {"pg": {"t": {"id": {"between": [1]}}}}),
         f"{ON_ID}: between operator must have exactly 2 values, got 1"),
        (_job({"pg": {"t": ["id"]}}, {"pg": {"t": {"id": {"gt": [1, 2]}}}}),
         f"{ON_ID}: gt operator must have exactly 1 value, got 2"),
        (_job({"pg": {"t": ["id"]}}, {"pg": {"t": {"id": {"regex": ["x"]}}}}),
         f"{ON_ID}: unknown operator 'regex' (expected one of eq, gt, gte, lt, lte, between, in, "
         "nin, ne, like)"),
        (_job({"pg": {"t": ["id"]}}, {"pg": {"t": {"id": {"like": [5]}}}}),
         f"{ON_ID}: like operator takes exactly 1 string pattern"),
    ],
)  # fmt: skip
def test_job_requests_the_reference_fails_later_are_refused_at_once(
    production: Processes, body: dict[str, Any], message: str
):
    response = httpx.post(f"{production.api_url}/v1/fetcher", json=body, headers=production.headers)
    error = refused(response, "FET-0401")
    assert (error["title"], error["message"]) == ("Invalid Data Request", message)
