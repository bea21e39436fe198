"""The S3 server killed mid-upload and restarted (a private nanio): the running job rides it
out and completes, its object whole, and no incomplete multipart upload remains."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.crypto.sealing import open_result
from adapters.memory.datasource_reader import MemoryTable
from adapters.storage.s3 import MIN_PART_SIZE, S3ResultStorage, S3Settings
from application.jobs.commands.run_job import RunLimits
from application.ports.messaging import Settlement
from domain.job import JobCompleted
from domain.tenant import SINGLE_TENANT
from tests.support.nanio import ACCESS_KEY, SECRET_KEY, Nanio, s3_client
from tests.support.twins import app

pytestmark = pytest.mark.integration

__all__ = ["app"]
BUCKET = "outage-test"


@pytest.fixture
def nanio(tmp_path: Path) -> Iterator[Nanio]:
    server = Nanio(tmp_path / "nanio-data")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def raw(nanio: Nanio) -> AsyncIterator[Any]:
    async with s3_client(nanio.endpoint, ACCESS_KEY, SECRET_KEY) as client:
        await client.create_bucket(Bucket=BUCKET)
        yield client


class HoldAfter:
    """The in-memory reader, holding its stream after ``chunks`` chunks until ``release``."""

    def __init__(self, inner: Any, chunks: int) -> None:
        self._inner = inner
        self._chunks = chunks
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stream(self, endpoint: Any, prepared: Any) -> AsyncIterator[Any]:
        n = 0
        async for chunk in self._inner.stream(endpoint, prepared):
            yield chunk
            n += 1
            if n == self._chunks:
                self.holding.set()
                await self.release.wait()


async def test_a_job_rides_out_the_s3_server_killed_mid_upload(app, nanio, raw) -> None:
    await app.connection()
    wide = "x" * 1000
    rows = [{"id": i, "name": wide} for i in range(12_000)]  # about 12 MiB: several parts
    app.reader.database("db.local", "pgsql").tables["wide"] = MemoryTable(
        columns=[("id", "integer"), ("name", "text")], rows=rows
    )
    app.reader.chunk_rows = 500
    storage = await S3ResultStorage.open(
        S3Settings(
            bucket=BUCKET, endpoint_url=nanio.endpoint, access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY, use_path_style=True, part_size=MIN_PART_SIZE,
        )
    )  # fmt: skip
    reader = HoldAfter(app.reader, chunks=14)  # past the first part (5 MiB)
    app.run_job.reader = reader
    app.run_job.storage = storage
    app.run_job.limits = RunLimits(
        retry_backoff=0.2, max_backoff=1.0, lease=timedelta(seconds=8), outage_window=60
    )
    job = (
        await app.request_job(
            {"pgsql": {"wide": ["id", "name"]}}, None, {"source": "payments"}, tenant=SINGLE_TENANT
        )
    ).job
    try:
        running = asyncio.create_task(app.run_job(job.id, tenant=SINGLE_TENANT))
        await asyncio.wait_for(reader.holding.wait(), 30)
        listed = await raw.list_multipart_uploads(Bucket=BUCKET)
        assert len(listed.get("Uploads", [])) == 1  # a part is up
        nanio.kill()
        reader.release.set()
        await asyncio.sleep(3)  # the job keeps failing against the dead server
        assert not running.done()
        nanio.start()
        assert await asyncio.wait_for(running, 60) is Settlement.ACK
    finally:
        await storage.close()
    events = await app.store.job_events(job.id)
    assert isinstance(events[-1], JobCompleted)
    stored = events[-2]
    found = await raw.get_object(Bucket=BUCKET, Key=stored.path)
    async with found["Body"] as body:
        blob = await body.read()
    keys = app.ring.current
    plaintext = open_result(blob, keys.storage, keys.external_hmac, stored.hmac)  # whole
    assert len(json.loads(plaintext)["pgsql"]["wide"]) == 12_000
    listed = await raw.list_multipart_uploads(Bucket=BUCKET)
    assert listed.get("Uploads", []) == []  # the upload the outage cut was aborted
