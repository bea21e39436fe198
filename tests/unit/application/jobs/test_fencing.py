"""Fenced results: a claim that lost its lease and commits late never replaces the result the
winning claim recorded (``result_key``), and the lease is checked before a result shows.

The stall is injected, not timed: worker A's upload waits at its commit (after its last lease
check) until the test lets it go, and its lease renewals wait meanwhile, as a frozen process's
would; worker B takes the job over in between."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from adapters.crypto.sealing import open_result
from application.jobs.commands.run_job import RunLimits, result_key
from application.ports.messaging import Settlement
from domain.job import JobResultStored
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}
LEASE = timedelta(seconds=2)


class StalledCommit:
    """The storage, writing each result as one PUT at commit, as S3 does for a result under
    one part (nothing is pending before it, so no sweep can abort it); the commit waits until
    ``resume`` is set, and ``stalled`` is set when one waits."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.stalled = asyncio.Event()
        self.resume = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def begin(self, key: str) -> Any:
        return _SinglePut(self, key)


class _SinglePut:
    def __init__(self, storage: StalledCommit, key: str) -> None:
        self._storage = storage
        self._key = key
        self._data = bytearray()

    async def write(self, data: bytes) -> None:
        self._data += data

    async def commit(self) -> None:
        self._storage.stalled.set()
        await self._storage.resume.wait()
        upload = await self._storage._inner.begin(self._key)
        await upload.write(bytes(self._data))
        await upload.commit()

    async def abort(self) -> None:
        self._data.clear()


class FrozenLeases:
    """The leases, whose renewals wait while ``thawed`` is clear: a stalled process does not
    beat."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.thawed = asyncio.Event()
        self.thawed.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def renew(self, *args: Any) -> bool:
        await self.thawed.wait()
        return bool(await self._inner.renew(*args))


def _verified(app: Any, stored: JobResultStored) -> dict[str, Any]:
    """The stored object at the recorded path, decrypted and checked against the recorded
    HMAC (what every consumer does with ``job.completed``)."""
    blob = app.storage.objects[stored.path]
    keys = app.ring.current
    return json.loads(open_result(blob, keys.storage, keys.external_hmac, stored.hmac))


async def test_a_stalled_worker_committing_after_a_takeover_never_replaces_the_recorded_result(
    app,
):
    await app.connection()
    limits = RunLimits(retry_backoff=0.0, lease=LEASE, watch_interval=0.01)
    job = (
        await app.request_job({"pgsql": {"accounts": ["*"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    storage = StalledCommit(app.storage)
    leases = FrozenLeases(app.job_index)
    worker_a = replace(app.run_job, storage=storage, leases=leases, limits=limits)
    worker_b = replace(app.run_job, worker_id="worker-2", limits=limits)

    running_a = asyncio.create_task(worker_a(job.id, tenant=SINGLE_TENANT))
    await asyncio.wait_for(storage.stalled.wait(), 5)  # A checked its lease, and stalls
    leases.thawed.clear()  # ... with its heartbeat
    app.clock.advance(seconds=3)  # A's lease ran out unseen
    table = app.reader.database("db.local", "pgsql").tables["accounts"]
    table.rows = [{**row, "name": f"changed-{row['id']}"} for row in table.rows]

    assert await asyncio.wait_for(worker_b(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    storage.resume.set()  # A wakes and commits its (old) rows
    await asyncio.sleep(0)
    leases.thawed.set()
    assert await asyncio.wait_for(running_a, 5) is Settlement.ACK

    [stored] = [e for e in await app.store.job_events(job.id) if isinstance(e, JobResultStored)]
    assert stored.worker_id == "worker-2"
    rows = _verified(app, stored)["pgsql"]["accounts"]  # decrypts, and the HMAC matches
    assert [row["name"] for row in rows] == [f"changed-{i}" for i in range(1, 6)]
    assert stored.path == f"external-data/{job.id}.claim-2.json"
    # A's late object went under its own claim's key, never over the recorded one; refused at
    # recording, A deleted it: only the recorded object is left.
    assert set(app.storage.objects) == {result_key(job, 2)}


async def test_a_worker_whose_lease_was_taken_during_extraction_publishes_nothing(app):
    """The lease check before the commit: another worker took the lease while this one
    extracted and its heartbeat had not noticed; the commit must not happen."""
    await app.connection()
    limits = RunLimits(retry_backoff=0.0, lease=LEASE, watch_interval=0.01)
    job = (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    leases = FrozenLeases(app.job_index)
    reader = app.reader
    taken = asyncio.Event()

    class TakenDuringExtraction:
        def __getattr__(self, name: str) -> Any:
            return getattr(reader, name)

        async def stream(self, endpoint: Any, prepared: Any) -> Any:
            async for chunk in reader.stream(endpoint, prepared):
                yield chunk
            if not taken.is_set():
                leases.thawed.clear()  # this worker's heartbeat stalls
                app.clock.advance(seconds=3)
                now = app.clock.now()
                assert await app.job_index.take(job.id, 2, "worker-2", now, now + LEASE)
                taken.set()
                leases.thawed.set()  # its next renewal (the check) sees the new holder

    worker = replace(app.run_job, leases=leases, limits=limits, reader=TakenDuringExtraction())
    assert await asyncio.wait_for(worker(job.id, tenant=SINGLE_TENANT), 5) is Settlement.ACK
    assert taken.is_set()
    assert app.storage.objects == {}
    assert not [e for e in await app.store.job_events(job.id) if isinstance(e, JobResultStored)]


def test_the_first_claim_keeps_the_references_key_and_tenants_their_prefix():
    from datetime import UTC, datetime
    from uuid import uuid4

    from domain.job import request_job
    from domain.request import ExtractionRequest
    from domain.tenant import Tenant

    request = ExtractionRequest.create({"db": {"t": ["id"]}}, None, SOURCE)
    job_id = uuid4()
    from domain.job import apply

    single = apply(request_job(job_id, request, datetime.now(UTC), SINGLE_TENANT), None)
    assert result_key(single) == result_key(single, 1) == f"external-data/{job_id}.json"
    assert result_key(single, 3) == f"external-data/{job_id}.claim-3.json"
    acme = apply(request_job(job_id, request, datetime.now(UTC), Tenant("acme")), None)
    assert result_key(acme, 2) == f"acme/external-data/{job_id}.claim-2.json"
