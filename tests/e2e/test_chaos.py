"""Chaos: jobs flow through `fetcher api`, `relay` and two `worker`s while workers are
SIGKILLed mid-job, the broker is cut (a TCP proxy in front of the shared RabbitMQ) and the
object storage server (a nanio of the test's own) is killed and restarted.

Every job must complete with its terminal event delivered (a duplicate only with the same
``ce-id``) and signed; every result must decrypt and match its HMAC; nothing may be left in
the bucket but those results (no orphan object, no incomplete multipart upload); no process
log may hold a traceback. The takeover time of each job a killed worker left is printed and
must stay within 30 s; jobs a live worker dropped are counted apart from those (and must be
none).

The suite runs a reduced form; ``make chaos`` runs the full size. Knobs (environment, with
the suite's values): ``CHAOS_JOBS`` (60), ``CHAOS_LARGE_EVERY`` (every n-th job reads the
large table, a multipart upload; 10), ``CHAOS_SUBMIT_SECONDS`` (40), ``CHAOS_WORKER_KILLS``
(2), ``CHAOS_BROKER_CUTS`` (1), ``CHAOS_BROKER_CUT_SECONDS`` (10), ``CHAOS_STORAGE_RESTARTS``
(1), ``CHAOS_STORAGE_DOWN_SECONDS`` (3), ``CHAOS_DATABASE_CUTS`` (the event store's
PostgreSQL cut through its proxy; 0), ``CHAOS_DATABASE_CUT_SECONDS`` (5),
``CHAOS_SETTLE_SECONDS`` (time allowed after the last submission for every job to end; 240),
and ``CHAOS_WORKER_ENV`` (``NAME=value,...`` added to the workers' and relay's settings, such
as ``FETCHER_LEASE_SECONDS=30``; the roles' defaults otherwise).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
from aiobotocore.session import get_session

from tests.e2e.behind_proxies import EventCollector, ProxiedStack, proxied_stack, wait_ready
from tests.e2e.conftest import (
    S3_BUCKET,
    create_database,
    drop_database,
    pg_url,
)
from tests.e2e.test_job_flow import PRODUCT, derived_key, register
from tests.support.nanio import ACCESS_KEY, SECRET_KEY, Nanio
from tests.support.results import open_sealed
from tests.support.signing import HmacTestSigner


def _knob(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


JOBS = _knob("CHAOS_JOBS", 60)
LARGE_EVERY = _knob("CHAOS_LARGE_EVERY", 10)
SUBMIT_SECONDS = _knob("CHAOS_SUBMIT_SECONDS", 40)
WORKER_KILLS = _knob("CHAOS_WORKER_KILLS", 2)
BROKER_CUTS = _knob("CHAOS_BROKER_CUTS", 1)
BROKER_CUT_SECONDS = _knob("CHAOS_BROKER_CUT_SECONDS", 10)
STORAGE_RESTARTS = _knob("CHAOS_STORAGE_RESTARTS", 1)
DATABASE_CUTS = _knob("CHAOS_DATABASE_CUTS", 0)
DATABASE_CUT_SECONDS = _knob("CHAOS_DATABASE_CUT_SECONDS", 5)
STORAGE_DOWN_SECONDS = _knob("CHAOS_STORAGE_DOWN_SECONDS", 3)
SETTLE_SECONDS = _knob("CHAOS_SETTLE_SECONDS", 240)
TAKEOVER_SECONDS = 30
"""The longest a job a killed worker left may wait to be claimed again (the issue's bound)."""
SMALL_ROWS = 2_000
LARGE_ROWS = 60_000
"""About 14 MiB of result: two parts of a multipart upload."""
PAD = 180


def _worker_env() -> dict[str, str]:
    raw = os.environ.get("CHAOS_WORKER_ENV", "")
    pairs = (item.split("=", 1) for item in raw.split(",") if "=" in item)
    return {name.strip(): value.strip() for name, value in pairs}


class OwnStorage(Nanio):
    """A nanio server of the test's own (so killing it disturbs nobody), with its client."""

    def client(self) -> Any:
        return get_session().create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )


async def _create_bucket(storage: OwnStorage) -> None:
    async with storage.client() as s3:
        await s3.create_bucket(Bucket=S3_BUCKET)


async def _uploads(s3: Any, prefix: str) -> list[str]:
    """Keys of the incomplete multipart uploads under ``prefix``."""
    listed = await s3.list_multipart_uploads(Bucket=S3_BUCKET, Prefix=prefix)
    return [item["Key"] for item in listed.get("Uploads", [])]


async def _bucket_contents(storage: OwnStorage, prefix: str) -> tuple[set[str], list[str]]:
    """(object keys, keys of incomplete multipart uploads) under ``prefix``."""
    keys: set[str] = set()
    async with storage.client() as s3:
        paginator = s3.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=S3_BUCKET, Prefix=prefix):
            keys |= {item["Key"] for item in page.get("Contents", [])}
        return keys, await _uploads(s3, prefix)


async def _read_object(s3: Any, key: str) -> bytes:
    response = await s3.get_object(Bucket=S3_BUCKET, Key=key)
    async with response["Body"] as stream:
        data: bytes = await stream.read()
    return data


async def _fill_source(name: str) -> None:
    await create_database(name)
    conn = await asyncpg.connect(pg_url(name))
    try:
        for table, rows in (("small", SMALL_ROWS), ("large", LARGE_ROWS)):
            await conn.execute(
                f"CREATE TABLE {table} AS SELECT g AS id, repeat('x', {PAD}) || g AS pad "
                f"FROM generate_series(1, {rows}) g"
            )
    finally:
        await conn.close()


@dataclass
class Kill:
    worker: str
    worker_id: str
    at: datetime
    holding: set[str]


@dataclass
class Chaos:
    stack: ProxiedStack
    storage: OwnStorage
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    kills: list[Kill] = field(default_factory=list)
    extra_jobs: list[str] = field(default_factory=list)
    db: asyncpg.Connection | None = None
    """The test's one connection to the event store, for watching claims."""
    """Jobs the fault schedule submitted itself (a large one before a kill)."""
    faults: list[str] = field(default_factory=list)
    spawned: int = 0

    def start_worker(self) -> str:
        self.spawned += 1
        name = f"worker-{self.spawned}"
        self.workers[name] = self.stack.processes.start("worker", name, **_worker_env())
        return name

    def worker_id(self, name: str) -> str:
        return f"{socket.gethostname()}:{self.workers[name].pid}"

    async def holding(self, worker_id: str | None, *, large: bool = False) -> set[str]:
        """The jobs whose latest event is a claim by ``worker_id`` (by any worker: ``None``),
        only those reading the large table if ``large``."""
        if self.db is None or self.db.is_closed():
            self.db = await asyncpg.connect(self.stack.store_url)
        rows = await self.db.fetch(
            """
                SELECT e.originator_id::text AS job FROM stored_events e
                WHERE e.topic = 'domain.job:JobClaimed'
                  AND ($1::text IS NULL
                       OR convert_from(e.state, 'UTF8')::jsonb ->> 'worker_id' = $1)
                  AND NOT EXISTS (
                    SELECT 1 FROM stored_events later
                    WHERE later.originator_id = e.originator_id
                      AND later.originator_version > e.originator_version)
                  AND (NOT $2 OR EXISTS (
                    SELECT 1 FROM stored_events requested
                    WHERE requested.originator_id = e.originator_id
                      AND requested.topic = 'domain.job:JobRequested'
                      AND convert_from(requested.state, 'UTF8') LIKE '%"large"%'))
                """,
            worker_id,
            large,
        )
        return {str(row["job"]) for row in rows}

    async def _until_holding(self, worker_id: str | None, *, large: bool, seconds: float) -> None:
        for _ in range(int(seconds * 10)):
            if await self.holding(worker_id, large=large):
                return
            await asyncio.sleep(0.1)

    async def _uploading_worker(self, *, seconds: float) -> str | None:
        """The first running worker seen holding a large job whose multipart upload has
        begun, within ``seconds``."""
        async with self.storage.client() as s3:
            for _ in range(int(seconds * 4)):
                uploads = await _uploads(s3, self.stack.key_prefix)
                for name in self.workers:
                    held = await self.holding(self.worker_id(name), large=True)
                    if any(job in key for key in uploads for job in held):
                        return name
                await asyncio.sleep(0.25)
        return None

    async def kill_worker(self) -> None:
        """SIGKILLs a running worker once it holds a job, and starts another in its place.
        Every other kill submits a large job and waits (up to 20 s) for a worker to be
        uploading one, and kills that worker; the others kill the oldest worker."""
        name = None
        if len(self.kills) % 2 == 1:
            tag = f"before-kill-{len(self.kills)}"
            self.extra_jobs.append(await asyncio.to_thread(_post, self.stack.api, tag, large=True))
            name = await self._uploading_worker(seconds=20)
        if name is None:
            name = next(iter(self.workers))
            await self._until_holding(self.worker_id(name), large=False, seconds=5)
        worker_id = self.worker_id(name)
        proc = self.workers.pop(name)
        proc.send_signal(signal.SIGKILL)
        at = datetime.now(UTC)
        proc.wait(timeout=10)
        held = await self.holding(worker_id)
        big = await self.holding(worker_id, large=True)
        async with self.storage.client() as s3:
            uploads = await _uploads(s3, self.stack.key_prefix)
        cut = sum(any(job in key for job in held) for key in uploads)
        self.kills.append(Kill(name, worker_id, at, held))
        self.faults.append(
            f"{at:%H:%M:%S} SIGKILL {name} holding {len(held)} job(s), {len(big)} large, "
            f"{cut} multipart upload(s) begun"
        )
        self.start_worker()

    async def cut_broker(self) -> None:
        """Cuts the broker while a live worker runs a large job (waiting at most 10 s)."""
        await self._until_holding(None, large=True, seconds=10)
        running = await self.holding(None)
        self.stack.broker.cut()
        self.faults.append(
            f"{datetime.now(UTC):%H:%M:%S} broker cut {BROKER_CUT_SECONDS}s "
            f"with {len(running)} job(s) running"
        )
        await asyncio.sleep(BROKER_CUT_SECONDS)
        self.stack.broker.restore()

    async def cut_database(self) -> None:
        self.stack.database.cut()
        self.faults.append(f"{datetime.now(UTC):%H:%M:%S} database cut {DATABASE_CUT_SECONDS}s")
        await asyncio.sleep(DATABASE_CUT_SECONDS)
        self.stack.database.restore()

    async def restart_storage(self) -> None:
        self.storage.kill()
        self.faults.append(f"{datetime.now(UTC):%H:%M:%S} storage killed")
        await asyncio.sleep(STORAGE_DOWN_SECONDS)
        await asyncio.to_thread(self.storage.start)


def _schedule() -> list[str]:
    """The faults, interleaved: kill, cut, restart, database cut, kill, ..."""
    left = {
        "kill": WORKER_KILLS,
        "cut": BROKER_CUTS,
        "restart": STORAGE_RESTARTS,
        "database": DATABASE_CUTS,
    }
    order: list[str] = []
    while any(left.values()):
        for kind in left:
            if left[kind]:
                order.append(kind)
                left[kind] -= 1
    return order


@pytest.fixture
def chaos(run_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Chaos, str]]:
    logs = tmp_path_factory.mktemp("chaos-logs")
    storage = OwnStorage(tmp_path_factory.mktemp("chaos-nanio"))
    storage.start()
    source = f"fetcher_e2e_chaos_src_{run_id}"
    try:
        asyncio.run(_create_bucket(storage))
        asyncio.run(_fill_source(source))
        for stack in proxied_stack(
            f"{run_id}_chaos",
            logs,
            tmp_path_factory.mktemp("chaos-data"),
            s3_endpoint=storage.endpoint,
            s3_credentials=(ACCESS_KEY, SECRET_KEY),
            RABBITMQ_NUMBERS_OF_WORKERS="3",
        ):
            yield Chaos(stack, storage), source
    finally:
        storage.kill()
        asyncio.run(drop_database(source))


@pytest.fixture
async def running_chaos(chaos: tuple[Chaos, str]) -> AsyncIterator[tuple[Chaos, str]]:
    """``chaos``, its database connection closed on the test's own loop."""
    yield chaos
    if chaos[0].db is not None:
        await chaos[0].db.close()


def _is_large(n: int) -> bool:
    return bool(LARGE_EVERY) and n % LARGE_EVERY == LARGE_EVERY - 1


def _post(api: str, tag: str, *, large: bool) -> str:
    table = "large" if large else "small"
    for _ in range(30):
        response = httpx.post(
            f"{api}/v1/fetcher",
            json={
                "dataRequest": {"mappedFields": {"chaos_pg": {table: ["*"]}}},
                "metadata": {"source": PRODUCT, "tag": tag},
            },
            timeout=60,
        )
        if response.status_code == 202:
            return str(response.json()["jobId"])
        # Only "try again later" (the event store cut), never another failure.
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "FET-0003", response.text
        time.sleep(1)
    raise AssertionError(f"job {tag} was never accepted")


def _submit_all(api: str) -> list[str]:
    """``JOBS`` jobs, evenly over ``SUBMIT_SECONDS`` (at once when behind)."""
    started = time.monotonic()
    jobs = []
    for n in range(JOBS):
        time.sleep(max(0.0, started + n * SUBMIT_SECONDS / JOBS - time.monotonic()))
        jobs.append(_post(api, str(n), large=_is_large(n)))
    return jobs


def _statuses(api: str, jobs: list[str]) -> dict[str, dict[str, Any]]:
    with httpx.Client(base_url=api, timeout=30) as client:
        return {job: client.get(f"/v1/fetcher/{job}").json() for job in jobs}


def _history(api: str, job: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{api}/v1/fetcher/{job}/events", timeout=30)
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def _parse(timestamp: str) -> datetime:
    whole, _, fraction = timestamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00")


@pytest.mark.timeout(SUBMIT_SECONDS + SETTLE_SECONDS + 240)
async def test_chaos_every_job_ends_once_with_valid_event_and_object(
    running_chaos: tuple[Chaos, str], capsys: pytest.CaptureFixture[str]
) -> None:
    state, source = running_chaos
    stack = state.stack
    processes = stack.processes
    started = time.monotonic()
    extra = _worker_env()
    processes.start("api")
    processes.start("relay", **extra)
    state.start_worker()
    state.start_worker()
    processes.wait_healthy()
    for name in ("relay", *state.workers):
        wait_ready(processes.health_urls[name], processes)
    register(stack.api, source, "chaos_pg")

    async with EventCollector(stack.exchange) as events:
        submitting = asyncio.create_task(asyncio.to_thread(_submit_all, stack.api))
        faults = _schedule()
        for kind in faults:
            await asyncio.sleep(SUBMIT_SECONDS / (len(faults) + 1))
            if kind == "kill":
                await state.kill_worker()
            elif kind == "cut":
                await state.cut_broker()
            elif kind == "database":
                await state.cut_database()
            else:
                await state.restart_storage()
        jobs: list[str] = [*await submitting, *state.extra_jobs]
        submitted = time.monotonic()

        deadline = submitted + SETTLE_SECONDS
        pending = list(jobs)
        finals: dict[str, dict[str, Any]] = {}
        while pending and time.monotonic() < deadline:
            for job, body in _statuses(stack.api, pending).items():
                if body.get("status") in ("completed", "failed"):
                    finals[job] = body
            pending = [job for job in pending if job not in finals]
            await events.drain()
            await asyncio.sleep(1)
        assert not pending, f"{len(pending)} jobs never ended: {pending[:5]}\n{processes.tail()}"
        missing = await events.until(set(jobs), timeout=60)
        await asyncio.sleep(2)
        await events.drain()
    ended = time.monotonic()

    # Who dropped what: jobs a killed worker left, and jobs a live worker dropped.
    killed = {kill.worker_id: kill for kill in state.kills}
    takeovers: list[tuple[str, float]] = []
    dropped_by_live: list[tuple[str, float]] = []
    for job in jobs:
        claims = [e for e in _history(stack.api, job) if e["type"] == "Claimed"]
        for earlier, later in itertools.pairwise(claims):
            worker = earlier["facts"]["worker_id"]
            if worker in killed and job in killed[worker].holding:
                taken = (_parse(later["timestamp"]) - killed[worker].at).total_seconds()
                takeovers.append((job, taken))
            else:
                claimed = _parse(later["timestamp"]) - _parse(earlier["timestamp"])
                dropped_by_live.append((job, claimed.total_seconds()))
    left_by_killed = sum(len(kill.holding) for kill in state.kills)
    taken_over = {job for job, _ in takeovers}
    untaken = [job for kill in state.kills for job in kill.holding if job not in taken_over]

    failures = Counter(
        (finals[job].get("metadata") or {}).get("error", "?")
        for job in jobs
        if finals[job]["status"] == "failed"
    )
    completed = [job for job in jobs if finals[job]["status"] == "completed"]
    duplicates = sum(len(each) - 1 for each in events.events.values())
    large = sum(map(_is_large, range(JOBS)))
    report = [
        f"chaos: {len(jobs)} jobs ({large} large, and {len(state.extra_jobs)} large ones "
        "submitted before a kill)",
        *(f"  fault {line}" for line in state.faults),
        f"  completed {len(completed)}, failed {len(jobs) - len(completed)} {dict(failures)}; "
        f"events {sum(map(len, events.events.values()))} ({duplicates} duplicates, same ce-id)",
        f"  jobs left by killed workers: {left_by_killed}, taken over {len(takeovers)}; "
        f"jobs dropped by a live worker: {len(dropped_by_live)}",
        *(f"  takeover of {job} (killed worker): {s:.1f}s after the kill" for job, s in takeovers),
        *(
            f"  reclaim of {job} (dropped by a live worker): {s:.1f}s after its claim"
            for job, s in dropped_by_live
        ),
        f"  run {ended - started:.0f}s (submitting {submitted - started:.0f}s, "
        f"settling {ended - submitted:.0f}s)",
    ]
    with capsys.disabled():
        print("\n" + "\n".join(report))

    # Every terminal event: delivered, signed, matching the job; duplicates share a ce-id.
    external = derived_key("external-hmac")
    # As a consumer would, with the tests' own signer (independent of the service's).
    signer = HmacTestSigner(external)
    assert not missing, f"no event for {len(missing)} jobs: {sorted(missing)[:5]}"
    for job in jobs:
        delivered = events.events[job]
        assert len({bytes(headers["ce-id"]) for _, headers, *_ in delivered}) == 1, job
        status = finals[job]["status"]
        for routing_key, headers, body, exchange in delivered:
            assert routing_key == f"job.{status}", (job, routing_key, status)
            signer.verify(
                headers=headers,
                exchange=exchange,
                routing_key=routing_key,
                body=body,
                now=int(time.time()),
                max_age=3600,
            )

    # Every completed result decrypts, matches its HMAC and has its rows.
    storage_key = derived_key("storage")
    prefix = stack.key_prefix
    expected_keys = set()
    async with state.storage.client() as s3:
        for job in completed:
            body = json.loads(events.events[job][0][2])
            result = body["result"]
            key = prefix + result["path"]
            expected_keys.add(key)
            blob = await _read_object(s3, key)
            plaintext = open_sealed(blob, storage_key, external, result["hmac"])
            tables = json.loads(plaintext)["chaos_pg"]
            rows = next(iter(tables.values()))
            assert len(rows) == result["rowCount"] in (SMALL_ROWS, LARGE_ROWS), job

    # Nothing else in the bucket: no orphan object, no incomplete multipart upload.
    keys, uploads = await _bucket_contents(state.storage, prefix)
    # nanio writes an object to ``.tmp.<uuid>`` beside its key and renames it when complete;
    # killed mid-write, it leaves that file, which its listing then shows. Not Fetcher's.
    keys = {key for key in keys if not key.rsplit("/", 1)[-1].startswith(".tmp.")}
    # The relay's witnesses of the audit checkpoints live beside the results: each one a
    # checkpoint the store still holds, unchanged.
    witness_keys = {key for key in keys if key.startswith(prefix + "audit/checkpoints/")}
    async with state.storage.client() as s3:
        witnessed = [json.loads(await _read_object(s3, key)) for key in sorted(witness_keys)]
    assert all(w["signature"] and w["position"] > 0 for w in witnessed), witnessed[:3]
    keys -= witness_keys
    # A claim whose upload committed on the server while its client saw the storage fail is
    # taken over under its own key (fencing): the object of the claim that lost is left
    # behind, never read. Those are told apart from true orphans: the job completed under
    # another key.
    completed_ids = {str(job) for job in completed}
    superseded = {
        key
        for key in keys - expected_keys
        if key.rsplit("/", 1)[-1].split(".", 1)[0] in completed_ids
    }
    if superseded:
        print(f"  objects of claims superseded after a storage fault: {len(superseded)}")
    keys -= superseded
    assert keys == expected_keys, f"orphans: {sorted(keys - expected_keys)[:5]}"
    assert uploads == [], f"{len(uploads)} incomplete multipart uploads: {uploads[:5]}"

    # Every job completes: a kill, a broker cut or a storage restart costs time, not the job.
    assert failures == Counter(), dict(failures)
    # Each job a killed worker left is taken over within 30 s of the kill.
    assert untaken == [], untaken
    slow = [(job, seconds) for job, seconds in takeovers if seconds > TAKEOVER_SECONDS]
    assert slow == [], slow
    # A live worker drops nothing (a job it runs finishes through a broker outage).
    assert dropped_by_live == [], dropped_by_live
    # Outages are one line per change, never a library's traceback.
    for log in sorted(processes.logs.glob("*.log")):
        if not log.name.startswith("nanio"):
            text = log.read_text(errors="replace")
            assert "Traceback" not in text, f"{log.name}:\n{text[-4000:]}"
