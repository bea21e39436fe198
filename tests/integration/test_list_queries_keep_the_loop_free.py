"""A list query never holds the event loop: while the largest list query the API allows runs
against a real HTTP server, on SQLite and on PostgreSQL, ``/health`` keeps answering at once,
and a query with a thousand metadata filters is refused (400) instead of being compiled."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
import uvicorn

from domain.connection import Connection, DatabaseType
from entrypoints.http.app import create_app
from entrypoints.http.list_params import MAX_METADATA_FILTERS, MAX_QUERY_PARAMETERS
from tests.integration.conftest import fresh_pg_database
from tests.integration.connection_api import Api, connections_api
from tests.support.serving import stop_server

pytestmark = pytest.mark.integration

BASE = "/v1/management/connections"
ROWS = 150
LIMIT = 100
HEALTH_BUDGET_SECONDS = 0.5
METADATA = {f"key{i}": "value" for i in range(MAX_METADATA_FILTERS)}


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
    else:
        with fresh_pg_database("fetcher_loop_free") as url:
            yield url


@pytest.fixture
async def api(database_url: str | None, tmp_path: Path) -> AsyncIterator[Api]:
    async with connections_api(database_url, tmp_path / "connections.sqlite3") as api:
        now = datetime.now(UTC)
        for i in range(ROWS):
            created = now - timedelta(seconds=i)
            await api.repository.add(
                Connection(
                    id=uuid4(),
                    product_name="payments",
                    config_name=f"db_{i}",
                    type=DatabaseType.POSTGRESQL,
                    host="db.example.com",
                    port=5432,
                    database_name="ledger",
                    user_name="reader",
                    password=None,
                    metadata=METADATA,
                    created_at=created,
                    updated_at=created,
                )
            )
        yield api


@dataclass
class HealthProbe:
    """Asks ``/health`` from another thread, over and over, and records how long each took."""

    url: str
    latencies: list[float] = field(default_factory=list)
    statuses: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                self.statuses.add(client.get(self.url).status_code)
                self.latencies.append(time.perf_counter() - started)
                time.sleep(0.005)

    def __enter__(self) -> HealthProbe:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=30)


@contextlib.asynccontextmanager
async def serving(api: Api) -> AsyncIterator[str]:
    """The API on a real uvicorn server on a free loopback port, in this event loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(api.services), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        try:
            await stop_server(server, task)
        finally:
            sock.close()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The heap of a whole test session is far larger than a server's: its collection pauses,
    which stop every thread, are kept out of the measurement."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _largest_allowed_query() -> list[tuple[str, str]]:
    today = datetime.now(UTC).date()
    query = [(f"metadata.{key}", value) for key, value in METADATA.items()]
    query += [("limit", str(LIMIT)), ("page", "1"), ("sortOrder", "desc"), ("type", "postgresql")]
    query += [("startDate", str(today - timedelta(days=1))), ("endDate", str(today))]
    return query + [("ignored", "x")] * (MAX_QUERY_PARAMETERS - len(query))


async def test_health_answers_at_once_while_the_largest_list_queries_run(api: Api) -> None:
    largest = _largest_allowed_query()
    assert len(largest) == MAX_QUERY_PARAMETERS
    probe_query = [(f"metadata.{i:03x}", "v") for i in range(1000)]
    async with serving(api) as base, httpx.AsyncClient(base_url=base, timeout=60) as client:
        assert (await client.get(BASE, params=largest)).status_code == 200  # compiled once
        with frozen_heap(), HealthProbe(f"{base}/health") as health:
            await asyncio.sleep(0.2)
            for _ in range(3):
                answers = await asyncio.gather(
                    *(client.get(BASE, params=largest) for _ in range(2))
                )
                for answer in answers:
                    assert answer.status_code == 200, answer.text
                    body = answer.json()
                    assert (len(body["items"]), body["total"]) == (LIMIT, ROWS)
                refused = await client.get(BASE, params=probe_query)
                assert refused.status_code == 400, refused.text
                assert refused.json()["code"] == "FET-0405"
            await asyncio.sleep(0.2)
    assert health.statuses == {200} and len(health.latencies) > 10
    # One slow answer may be the machine's (a busy shared core); a query that held the loop
    # would slow one in each of the three rounds.
    slowest = sorted(health.latencies)[-5:]
    assert slowest[-2] < HEALTH_BUDGET_SECONDS, slowest
