"""The container image built and run for real: `podman build` with the local base image, then
`api`, `worker` and `relay` containers on the host network against this machine's PostgreSQL,
RabbitMQ and S3 server (a fresh database, queue and exchange names, and key prefix), one job to
its verified event; the health check, the non-root user, the drain on `podman stop` and the
size of /opt/fetcher.

Cost: the first build downloads and installs the dependencies (about 3-6 minutes here, vfs
storage on a loaded machine); podman's layer cache keeps every layer that does not depend on
the sources, so a rebuild after a change of the code redoes only the install and its copy.
Skipped only where podman is absent (deploy/container-engine.sh installs it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import aio_pika
import asyncpg
import httpx
import pytest

from deploy.walkthrough_db import STATEMENTS as WALKTHROUGH_TABLE
from tests.e2e.conftest import (
    MASTER_KEY,
    PG_ADMIN,
    RABBIT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    create_database,
    drop_database,
    free_port,
    pg_url,
)
from tests.integration.conftest import require_listening

ROOT = Path(__file__).resolve().parents[2]
PODMAN = shutil.which("podman")
BASE_IMAGE = os.environ.get("FETCHER_TEST_PYTHON_IMAGE", "localhost/debian-python:3.11-bookworm")
IMAGE = "localhost/fetcher:e2e"
MAX_RUNTIME_MB = 200
RUNTIME_USER = "10001"

pytestmark = pytest.mark.skipif(
    PODMAN is None,
    reason="podman is absent: `bash deploy/container-engine.sh` (as root) installs it and the "
    "local base image; CI's .ci/run does",
)


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(PODMAN), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args)}: {result.stdout[-2000:]}{result.stderr[-3000:]}"
        )
    return result


@pytest.fixture(scope="module")
def image() -> str:
    if podman("image", "exists", BASE_IMAGE, check=False).returncode != 0:
        engine = subprocess.run(
            ["bash", str(ROOT / "deploy" / "container-engine.sh")],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert engine.returncode == 0, engine.stderr[-3000:]
    podman(
        "build",
        "--format", "docker",  # keeps the HEALTHCHECK (the OCI format has none)
        "--network", "host",
        "--build-arg", f"PYTHON_IMAGE={BASE_IMAGE}",
        "-f", str(ROOT / "deploy" / "Dockerfile"),
        "-t", IMAGE,
        str(ROOT),
        timeout=1500,
    )  # fmt: skip
    return IMAGE


class Containers:
    """The containers a test started, stopped and removed at the end by their names."""

    def __init__(self, image: str, env: dict[str, str]) -> None:
        self.image = image
        self.env = env
        self.names: list[str] = []

    def run(self, role: str, **env: str) -> str:
        name = f"fetcher-e2e-{role}-{uuid.uuid4().hex[:8]}"
        options = [f"--env={k}={v}" for k, v in {**self.env, **env}.items()]
        podman("run", "--detach", "--network", "host", "--name", name, *options, self.image, role)
        self.names.append(name)
        return name

    def logs(self, name: str) -> str:
        result = podman("logs", name, check=False)
        return result.stdout + result.stderr

    def tail(self) -> str:
        return "\n".join(f"--- {name}\n{self.logs(name)[-3000:]}" for name in self.names)

    def remove_all(self) -> None:
        for name in self.names:
            podman("rm", "--force", "--time", "2", name, check=False, timeout=60)


def wait_for(url: str, containers: Containers, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise AssertionError(f"{url} never answered 200:\n{containers.tail()}")


async def prepare_source(name: str) -> None:
    await create_database(name)
    conn = await asyncpg.connect(pg_url(name))
    try:
        for statement in WALKTHROUGH_TABLE:
            await conn.execute(statement)
    finally:
        await conn.close()


async def first_event(exchange: str, submit: threading.Event, timeout: float) -> dict[str, object]:
    """Binds a queue of our own to the events exchange (as a consumer does), lets the job be
    submitted, and returns its first event as `fetcher event verify` reads a message."""
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        events = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue("", exclusive=True)
        await queue.bind(events, routing_key="#")
        submit.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = await queue.get(fail=False)
            if message is None:
                await asyncio.sleep(0.2)
                continue
            await message.ack()
            headers = {
                k: v.decode() if isinstance(v, bytes | bytearray) else v
                for k, v in message.headers.items()
            }
            return {
                "exchange": message.exchange,
                "routingKey": message.routing_key,
                "headers": headers,
                "body": message.body.decode(),
            }
        raise AssertionError("no job event within the time allowed")
    finally:
        await connection.close()


@pytest.fixture
def stack(image: str, tmp_path: Path) -> Iterator[tuple[Containers, dict[str, str], str]]:
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    run = uuid.uuid4().hex[:10]
    store, source = f"fetcher_img_store_{run}", f"fetcher_img_src_{run}"
    asyncio.run(create_database(store))
    asyncio.run(prepare_source(source))
    env = {
        "APP_ENC_KEY": MASTER_KEY,
        "FETCHER_DATABASE_URL": pg_url(store),
        "RABBITMQ_URL": RABBIT,
        "RABBITMQ_FETCHER_WORK_QUEUE": f"fetcher.img.{run}.queue",
        "RABBITMQ_JOB_EVENTS_EXCHANGE": f"fetcher.img.{run}.events",
        "FETCHER_BROKER_DECLARE_TOPOLOGY": "true",  # a fresh queue and exchange on the vhost
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_BUCKET": S3_BUCKET,
        "OBJECT_STORAGE_KEY_PREFIX": f"img-{run}/",
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
        "READYZ_DRAIN_DELAY_SEC": "2",
        "LOG_LEVEL": "info",
    }
    containers = Containers(image, env)
    try:
        yield containers, env, source
    finally:
        containers.remove_all()
        asyncio.run(drop_database(store))
        asyncio.run(drop_database(source))


def test_the_runtime_is_lean_and_runs_as_a_user(image: str):
    inspect = json.loads(podman("image", "inspect", image).stdout)[0]
    assert inspect["Config"]["User"] == f"{RUNTIME_USER}:{RUNTIME_USER}"
    assert inspect["Healthcheck"]["Test"] == ["CMD", "fetcher", "healthcheck"]
    # One container for every look inside (each one costs a copy of the tree with vfs).
    script = (
        "du -sm /opt/fetcher; id -u; fetcher --version; echo --; "
        "ls /opt/fetcher/bin /opt/fetcher/lib/python3*/site-packages"
    )
    output = podman("run", "--rm", "--entrypoint", "sh", image, "-c", script).stdout
    head, _, listing = output.partition("--\n")
    size, user, version = head.splitlines()
    megabytes = int(size.split()[0])
    print(f"/opt/fetcher: {megabytes} MB")
    assert megabytes <= MAX_RUNTIME_MB, megabytes
    assert user == RUNTIME_USER
    assert version == f"fetcher {metadata.version('fetcher')}"
    for left_out in ("pip", "pip3", "setuptools", "faker", "polyfactory", "grpc"):
        assert left_out not in listing.split(), left_out


@pytest.mark.timeout(1800)
def test_the_roles_run_a_job_to_its_verified_event_and_drain_on_stop(stack):
    containers, env, source = stack
    api_port, worker_health, relay_health = free_port(), free_port(), free_port()
    api = containers.run(
        "api",
        SERVER_ADDRESS=f"127.0.0.1:{api_port}",
        FETCHER_AUTH_DISABLED_INSECURE="true",
        VERSION="9.8.7",
    )
    # The worker on a specific address other than 127.0.0.1 (as a pod IP): its health port
    # is bound there, and the image's health check must find it.
    worker = containers.run(
        "worker", SERVER_ADDRESS=f"127.0.0.3:{free_port()}", HEALTH_PORT=str(worker_health)
    )
    relay = containers.run(
        "relay", SERVER_ADDRESS=f"127.0.0.1:{free_port()}", HEALTH_PORT=str(relay_health)
    )
    base = f"http://127.0.0.1:{api_port}"
    wait_for(f"{base}/readyz", containers)
    wait_for(f"http://127.0.0.3:{worker_health}/readyz", containers)
    wait_for(f"http://127.0.0.1:{relay_health}/readyz", containers)
    assert httpx.get(f"{base}/version").json()["version"] == "9.8.7"
    assert httpx.get(f"{base}/openapi/openapi.json").json()["info"]["version"] == "9.8.7"

    for name in (api, worker, relay):
        check = podman("healthcheck", "run", name, check=False)
        assert check.returncode == 0, f"{name}: {check.stdout}{check.stderr}"
        assert podman("exec", name, "id", "-u").stdout.strip() == RUNTIME_USER

    submit = threading.Event()
    submitted: dict[str, str] = {}

    def register_and_submit() -> None:
        submit.wait(60)
        connection = httpx.post(
            f"{base}/v1/management/connections",
            headers={"X-Product-Name": "payments"},
            json={
                "configName": "local_pg",
                "type": "POSTGRESQL",
                "host": "127.0.0.1",
                "port": 5432,
                "databaseName": source,
                "userName": "postgres",
                "password": "unused-with-trust",
            },
        )
        assert connection.status_code == 201, connection.text
        job = httpx.post(
            f"{base}/v1/fetcher",
            json={
                "dataRequest": {
                    "mappedFields": {"local_pg": {"public.walkthrough_accounts": ["*"]}}
                },
                "metadata": {"source": "payments"},
            },
        )
        assert job.status_code == 202, job.text
        submitted["job"] = job.json()["jobId"]

    submitter = threading.Thread(target=register_and_submit)
    submitter.start()
    try:
        event = asyncio.run(first_event(env["RABBITMQ_JOB_EVENTS_EXCHANGE"], submit, 180))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{containers.tail()}") from None
    finally:
        submitter.join()
    assert event["routingKey"] == "job.completed", event
    body = json.loads(str(event["body"]))
    assert body["jobId"] == submitted["job"]
    assert body["status"] == "completed", body
    # as a consumer would, with the image's own tool (the key derived from APP_ENC_KEY)
    verify = subprocess.run(
        [str(PODMAN), "exec", "-i", api, "fetcher", "event", "verify"],
        input=json.dumps(event), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert verify.stdout.strip() == "signature valid", verify.stderr
    job = httpx.get(f"{base}/v1/fetcher/{submitted['job']}").json()
    assert job["status"] == "completed" and job["resultPath"], job

    # podman stop sends SIGTERM: readiness reports draining, then the role ends by itself
    # (exit 0), well within the grace period, and says so.
    stopping = threading.Thread(target=podman, args=("stop", "--time", "60", api))
    stopping.start()
    statuses: set[int] = set()
    deadline = time.monotonic() + 30
    while stopping.is_alive() and time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            statuses.add(httpx.get(f"{base}/readyz", timeout=1).status_code)
        time.sleep(0.1)
    stopping.join()
    assert 503 in statuses, statuses
    podman("stop", "--time", "60", worker, relay, timeout=180)
    for name in (api, worker, relay):
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        assert state["ExitCode"] == 0, f"{name}: {state}\n{containers.logs(name)[-3000:]}"
        assert "shutdown: complete" in containers.logs(name), containers.logs(name)[-3000:]
    assert "shutdown: the worker finished its jobs" in containers.logs(worker)
