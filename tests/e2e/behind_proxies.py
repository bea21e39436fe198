"""`fetcher` processes whose PostgreSQL and RabbitMQ are reached through TCP proxies that a
test cuts and restores (the shared servers behind them are never touched), with the helpers
the outage and chaos tests share."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aio_pika
import httpx

from tests.e2e.conftest import (
    MASTER_KEY,
    PG_ADMIN,
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
)
from tests.integration.conftest import require_listening
from tests.support.tcp_proxy import ThreadedTcpProxy

TERMINAL = ("completed", "failed")


def _host_port(url: str, default: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default


@dataclass
class ProxiedStack:
    """The settings of processes behind ``database`` and ``broker`` proxies, and the
    processes started with them."""

    processes: Processes
    database: ThreadedTcpProxy
    broker: ThreadedTcpProxy
    store_url: str
    """The event store's database, reached directly (for the test's own checks)."""
    queue: str
    exchange: str
    key_prefix: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def api(self) -> str:
        return self.processes.api_url

    def log(self, name: str) -> str:
        return (self.processes.logs / f"{name}.log").read_text(errors="replace")


@dataclass
class _Names:
    store_db: str
    queue: str
    exchange: str
    key_prefix: str


def _names(tag: str) -> _Names:
    return _Names(
        store_db=f"fetcher_e2e_{tag}",
        queue=f"fetcher.e2e.{tag}.queue",
        exchange=f"fetcher.e2e.{tag}.events",
        key_prefix=f"e2e-{tag}/",
    )


def proxied_stack(
    tag: str,
    logs: Path,
    data: Path,
    *,
    s3_endpoint: str = S3_ENDPOINT,
    s3_credentials: tuple[str, str] = (S3_ACCESS, S3_SECRET),
    **env: str,
) -> Iterator[ProxiedStack]:
    """A fresh event store database, work queue and events exchange named after ``tag``; the
    proxies are started (listening); no process is started yet. Cleans up after."""
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    names = _names(tag)
    asyncio.run(create_database(names.store_db))
    pg_host, pg_port = _host_port(PG_ADMIN, 5432)
    mq_host, mq_port = _host_port(RABBIT, 5672)
    admin = urlsplit(PG_ADMIN)
    broker_parts = urlsplit(RABBIT)
    with (
        ThreadedTcpProxy(pg_host, pg_port) as database,
        ThreadedTcpProxy(mq_host, mq_port) as broker,
    ):
        user = f"{admin.username or 'postgres'}" + (f":{admin.password}" if admin.password else "")
        store_url = f"postgresql://{user}@{pg_host}:{pg_port}/{names.store_db}"
        proxied_store = f"postgresql://{user}@127.0.0.1:{database.port}/{names.store_db}"
        credentials = broker_parts.netloc.rsplit("@", 1)[0]
        port = free_port()
        environment = base_env(
            APP_ENC_KEY=MASTER_KEY,
            FETCHER_DATABASE_URL=proxied_store,
            FETCHER_DATA_DIR=str(data),
            RABBITMQ_URL=f"amqp://{credentials}@127.0.0.1:{broker.port}/",
            RABBITMQ_FETCHER_WORK_QUEUE=names.queue,
            RABBITMQ_JOB_EVENTS_EXCHANGE=names.exchange,
            OBJECT_STORAGE_ENDPOINT=s3_endpoint,
            OBJECT_STORAGE_BUCKET=S3_BUCKET,
            OBJECT_STORAGE_KEY_PREFIX=names.key_prefix,
            OBJECT_STORAGE_ACCESS_KEY_ID=s3_credentials[0],
            OBJECT_STORAGE_SECRET_KEY=s3_credentials[1],
            OBJECT_STORAGE_USE_PATH_STYLE="true",
            SERVER_ADDRESS=f"127.0.0.1:{port}",
            **env,
        )
        processes = Processes(env=environment, logs=logs, api_url=f"http://127.0.0.1:{port}")
        stack = ProxiedStack(
            processes, database, broker, store_url, names.queue, names.exchange, names.key_prefix
        )
        try:
            yield stack
        finally:
            processes.stop()
            asyncio.run(drop_database(names.store_db))
            asyncio.run(delete_broker_entities(names.queue, names.exchange))


async def delete_broker_entities(queue_name: str, exchange_name: str) -> None:
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        await channel.queue_delete(queue_name)
        await channel.exchange_delete(exchange_name)
    finally:
        await connection.close()


async def declare_events_exchange(exchange_name: str) -> None:
    """The events exchange (the processes declare it too; a test binds to it first)."""
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        await channel.declare_exchange(exchange_name, aio_pika.ExchangeType.TOPIC, durable=True)
    finally:
        await connection.close()


class EventCollector:
    """A queue bound to the events exchange on the real broker (not through a proxy), that
    collects every job event: ``(routing key, headers, body)`` by job id."""

    def __init__(self, exchange_name: str) -> None:
        self.exchange_name = exchange_name
        self.events: dict[str, list[tuple[str, dict[str, Any], bytes, str]]] = {}
        self._connection: aio_pika.abc.AbstractConnection | None = None

    async def __aenter__(self) -> EventCollector:
        await declare_events_exchange(self.exchange_name)
        self._connection = await aio_pika.connect(RABBIT)
        channel = await self._connection.channel()
        exchange = await channel.get_exchange(self.exchange_name)
        self._queue = await channel.declare_queue(exclusive=True)
        await self._queue.bind(exchange, routing_key="job.*")
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._connection is not None:
            await self._connection.close()

    async def drain(self) -> int:
        """Takes every message waiting now; returns how many."""
        taken = 0
        while (message := await self._queue.get(fail=False)) is not None:
            await message.ack()
            body = json.loads(message.body)
            headers = dict(message.headers)
            self.events.setdefault(str(body["jobId"]), []).append(
                (message.routing_key or "", headers, message.body, message.exchange or "")
            )
            taken += 1
        return taken

    async def until(self, job_ids: set[str], timeout: float) -> set[str]:
        """Collects until every job in ``job_ids`` has an event or ``timeout``; returns the
        jobs still without one."""
        deadline = time.monotonic() + timeout
        while True:
            await self.drain()
            missing = {job for job in job_ids if job not in self.events}
            if not missing or time.monotonic() > deadline:
                return missing
            await asyncio.sleep(0.2)


def wait_ready(url: str, processes: Processes, timeout: float = 60.0) -> httpx.Response:
    """Polls ``url``/readyz until 200."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{url}/readyz", timeout=5)
            if response.status_code == 200:
                return response
            last = response.text
        except httpx.HTTPError as error:
            last = repr(error)
        time.sleep(0.2)
    raise AssertionError(f"{url} not ready within {timeout}s ({last}):\n{processes.tail()}")


def readyz(url: str) -> httpx.Response | None:
    try:
        return httpx.get(f"{url}/readyz", timeout=5)
    except httpx.HTTPError:
        return None
