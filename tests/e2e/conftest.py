"""End-to-end fixtures: fetcher processes against real PostgreSQL, RabbitMQ and nanio."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import aio_pika
import asyncpg
import httpx
import pytest

from adapters.messaging.rabbitmq_topology import RabbitTopology
from adapters.messaging.wire.events import EVENTS_EXCHANGE
from adapters.messaging.wire.work import WORK_QUEUE
from tests.integration.auth_servers import LocalIdentityProvider
from tests.integration.conftest import require_listening

ROOT = Path(__file__).resolve().parents[2]
FETCHER = str(Path(sys.executable).parent / "fetcher")
PG_ADMIN = os.environ.get("FETCHER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
RABBIT = os.environ.get("FETCHER_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
S3_ENDPOINT = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:9100")
S3_BUCKET = os.environ.get("FETCHER_TEST_S3_BUCKET", "fetcher-test")
S3_ACCESS = os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test")
S3_SECRET = os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret")
MASTER_KEY = base64.b64encode(bytes(range(100, 132))).decode()
SOURCE_ROWS = 10_000


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.e2e)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def provision_broker(env: dict[str, str]) -> None:
    """What an operator does before starting the production roles (which declare nothing by
    default): the topology of ``env``'s work queue and events exchange on the test broker
    (directly: ``RABBITMQ_URL`` may be a proxy that a test takes down), and a consumer's
    queue for every event, so none is unroutable. Not the example event queues, which the
    test broker would keep the events of every run in: the consumer's queue keeps at most
    1,000 and goes two hours after its last use."""
    topology = RabbitTopology(
        work_queue=env.get("RABBITMQ_FETCHER_WORK_QUEUE") or WORK_QUEUE,
        events_exchange=env.get("RABBITMQ_JOB_EVENTS_EXCHANGE") or EVENTS_EXCHANGE,
        event_queues=(),
    )

    async def provision() -> None:
        await topology.apply(RABBIT)
        connection = await aio_pika.connect(RABBIT)
        try:
            channel = await connection.channel()
            queue = await channel.declare_queue(
                f"{topology.events_exchange}.consumer",
                durable=True,
                arguments={"x-expires": 7_200_000, "x-max-length": 1_000},
            )
            await queue.bind(topology.events_exchange, routing_key="#")
        finally:
            await connection.close()

    # on a thread of its own: a test may start processes from within its event loop
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, provision()).result()


def pg_url(database: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + database


async def create_database(name: str) -> None:
    admin = await asyncpg.connect(PG_ADMIN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()


async def drop_database(name: str) -> None:
    admin = await asyncpg.connect(PG_ADMIN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def run_id() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def source_database(run_id: str) -> Iterator[str]:
    """A database with a 10,000-row table of mixed column types."""
    name = f"fetcher_e2e_src_{run_id}"
    asyncio.run(_fill_source(name))
    yield name
    asyncio.run(drop_database(name))


async def _fill_source(name: str) -> None:
    await create_database(name)
    conn = await asyncpg.connect(pg_url(name))
    try:
        await conn.execute(
            """
            CREATE TABLE accounts (
                id bigint PRIMARY KEY, email text NOT NULL, amount numeric(18,2) NOT NULL,
                created_at timestamptz NOT NULL, active boolean NOT NULL, note text, uid uuid
            );
            INSERT INTO accounts
            SELECT g, 'user' || g || '@example.com', (g * 1.25)::numeric(18,2),
                   timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute 0.5 second',
                   g % 2 = 0, CASE WHEN g % 3 = 0 THEN NULL ELSE 'note "' || g || '" é' END,
                   md5(g::text)::uuid
            FROM generate_series(1, $1) g;
            """.replace("$1", str(SOURCE_ROWS))
        )
    finally:
        await conn.close()


@dataclass
class Processes:
    env: dict[str, str]
    logs: Path
    api_url: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    """What a caller sends to the API: a bearer token with every permission, when auth is on."""
    health_urls: dict[str, str] = field(default_factory=dict)
    """Where each started worker or relay (by log name) answers ``/health``, ``/readyz`` and
    ``/metrics`` (its ``HEALTH_PORT``, a free port of its own)."""

    def start(self, role: str, name: str | None = None, **env: str) -> subprocess.Popen[bytes]:
        """Starts ``fetcher <role>`` with ``env`` added, its output in ``<name or role>.log``."""
        name = name or role
        environment = {**self.env, **env}
        if (
            role != "serve"
            and environment.get("RABBITMQ_URL")
            and "FETCHER_BROKER_DECLARE_TOPOLOGY" not in environment
        ):
            provision_broker(environment)
        if role in ("worker", "relay") and "HEALTH_PORT" not in env:
            environment["HEALTH_PORT"] = str(free_port())
        self.health_urls[name] = f"http://127.0.0.1:{environment.get('HEALTH_PORT', '4007')}"
        log = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [FETCHER, role], cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a fetcher process exited early:\n{self.tail()}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"fetcher did not become healthy:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in self.logs.glob("*.log")
        )

    def stop(self, procs: list[subprocess.Popen[bytes]] | None = None) -> None:
        """Stops the given processes (all by default) with SIGTERM, then waits for them."""
        chosen = self.procs if procs is None else procs
        for proc in chosen:
            if proc.poll() is None:
                proc.terminate()
        for proc in chosen:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


ISOLATED_SETTINGS = (
    "FETCHER_", "RABBITMQ_", "OBJECT_STORAGE_", "APP_ENC", "PLUGIN_AUTH", "OTEL_",
    "ENABLE_TELEMETRY", "LOG_FORMAT", "READYZ_", "HEALTH_PORT", "DEPLOYMENT_MODE",
)  # fmt: skip
"""Settings of the caller's environment that never reach the processes under test."""


def base_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(ISOLATED_SETTINGS)
        and k not in ("HEALTH_PORT", "DEPLOYMENT_MODE", "OTEL_RESOURCE_SERVICE_VERSION")
    }
    # A short drain, so that stopping a process does not hold a test for 12 seconds.
    env["READYZ_DRAIN_DELAY_SEC"] = "1"
    env.update(extra)
    env["LOG_LEVEL"] = "INFO"
    return env


@contextlib.contextmanager
def serving(
    tmp_path_factory: pytest.TempPathFactory, name: str, **settings: str
) -> Iterator[Processes]:
    """``fetcher serve`` on its embedded default (its data in a fresh ``<name>-data`` folder),
    with ``settings`` added, once healthy; stopped afterwards."""
    port = free_port()
    env = base_env(
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp(f"{name}-data")),
        SERVER_ADDRESS=f"127.0.0.1:{port}",
        **settings,
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp(f"{name}-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    processes.start("serve")
    try:
        processes.wait_healthy()
        yield processes
    finally:
        processes.stop()


@pytest.fixture(scope="session")
def identity_provider() -> Iterator[LocalIdentityProvider]:
    """An OpenID provider on loopback whose tokens the production API accepts."""
    provider = LocalIdentityProvider().start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture(scope="session")
def production(
    run_id: str,
    tmp_path_factory: pytest.TempPathFactory,
    identity_provider: LocalIdentityProvider,
) -> Iterator[Processes]:
    """`fetcher api`, `fetcher worker` and `fetcher relay` as separate processes, the API
    verifying bearer tokens of ``identity_provider``."""
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    store_db = f"fetcher_e2e_store_{run_id}"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("prod-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=f"fetcher.e2e.{run_id}.queue",
        RABBITMQ_JOB_EVENTS_EXCHANGE=f"fetcher.e2e.{run_id}.events",
        STREAMING_CLOUDEVENTS_SOURCE="//lerian.fetcher/worker",
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-{run_id}/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
        FETCHER_AUTH_ISSUER=identity_provider.issuer,
        FETCHER_AUTH_AUDIENCE=identity_provider.audience,
    )
    token = identity_provider.token(exp=int(time.time()) + 3600)
    processes = Processes(
        env=env,
        logs=tmp_path_factory.mktemp("prod-logs"),
        api_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {token}"},
    )
    for role in ("api", "worker", "relay"):
        processes.start(role)
    try:
        processes.wait_healthy()
        yield processes
    finally:
        processes.stop()
        asyncio.run(drop_database(store_db))


@contextlib.asynccontextmanager
async def table_gone_before_the_worker_reads(
    processes: Processes, database: str
) -> AsyncIterator[str]:
    """A table that exists while a job naming it is submitted (so the API's schema check
    passes) and is dropped before any worker reads it: the workers are stopped (SIGSTOP) for
    the submission, the table dropped, the workers resumed. Yields the table's name; submit
    the job inside the block. The worker then fails the job as a missing table."""
    table = f"vanishing_{uuid.uuid4().hex[:8]}"
    await _sql(database, f"CREATE TABLE {table} (id bigint PRIMARY KEY, email text)")
    workers = [
        proc for proc in processes.procs if proc.args[-1] == "worker" and proc.poll() is None
    ]
    assert workers, "no running worker to hold"
    for proc in workers:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield table
        await _sql(database, f"DROP TABLE {table}")
    finally:
        for proc in workers:
            os.kill(proc.pid, signal.SIGCONT)


async def _sql(database: str, statement: str) -> None:
    conn = await asyncpg.connect(pg_url(database))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
