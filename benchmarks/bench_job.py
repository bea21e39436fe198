"""One extraction job end to end (API → queue → worker → S3 → event), against baselines.

Prints ratios measured in one run, never absolute verdicts (method: ``/work/shared/notes/
performance.md``). Each round runs, interleaved, in this order:

  B_json     ``COPY (SELECT row_to_json(t) FROM (SELECT ...) t) TO STDOUT`` through asyncpg's
             ``copy_from_query`` into a byte-counting sink: the floor for "JSON out of
             PostgreSQL", the main denominator
  B_wire     binary COPY of the same rows into a byte-counting sink: the transport floor
  R_naive    the reference's in-memory pipeline: ``fetch()`` all rows → dicts → one
             ``json.dumps`` (compact, sorted keys: the C encoder) → HMAC → one-shot AES-GCM →
             base64 → one PUT to the S3 server; no queue (the stand-in for the reference)
  candidate  the service itself: ``fetcher api``, ``fetcher worker`` and ``fetcher relay`` as
             separate processes on a fresh event-store database, RabbitMQ and the nanio S3
             server; timed from the job's POST to its ``job.completed`` event

The baselines each run in their own subprocess (timed inside it, after imports); their peak
memory is ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of a wrapper process minus that of an idle
interpreter with the same imports. The candidate's processes are started fresh every round,
start-up excluded; one small warm-up job (10 rows) goes through them first, then the worker's
peak growth is ``VmHWM`` (``/proc/<pid>/status``) after the measured job minus before it.

Correctness for free: every candidate result is fetched from S3, decrypted with keys derived
from this run's own ``APP_ENC_KEY`` (``KeyRing``), its HMAC and row count checked, and a sample
of its rows compared, as parsed values, with the same rows as R_naive encoded them.

Needs PostgreSQL (127.0.0.1:5432, trust, user postgres), RabbitMQ (amqp://guest:guest@
127.0.0.1:5672/) and nanio: ``bash deploy/services.sh start``. The source table lives in the
database ``fetcher_bench`` (``bench_<rows>``, created once, reused). Everything else the run
creates is removed at the end: event-store databases, the fetcher processes, its RabbitMQ work
queue and events exchange, and the S3 objects under its own key prefix.

Usage: .venv/bin/python benchmarks/bench_job.py [--rows 1000000] [--rounds 3] [--at REV]
       .venv/bin/python benchmarks/bench_job.py --memory-scaling [--rounds 3] [--at REV]
``--at REV`` runs the service as committed at REV (``git archive``), not the working tree.
``--memory-scaling`` runs the candidate (and R_naive, for contrast) at 100k and 1M rows and
prints the peaks: the candidate's must not grow with the number of rows.
Environment: FETCHER_BENCH_PG, FETCHER_TEST_RABBITMQ_URL, FETCHER_TEST_S3_* (as the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import suppress
from datetime import UTC, datetime
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
# With --at, children import the service from the extracted tree the processes run from.
TREE = Path(os.environ.get("FETCHER_BENCH_TREE") or ROOT)
sys.path.insert(0, str(TREE))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from source_table import ensure_source_table  # noqa: E402

FETCHER = str(Path(sys.executable).parent / "fetcher")
PG = os.environ.get("FETCHER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432").rstrip("/")
RABBIT = os.environ.get("FETCHER_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
S3_ENDPOINT = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:9100")
S3_BUCKET = os.environ.get("FETCHER_TEST_S3_BUCKET", "fetcher-test")
S3_ACCESS = os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test")
S3_SECRET = os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret")
DATABASE = "fetcher_bench"
CONFIG = "bench_pg"
PRODUCT = "bench"
COLUMNS = "id, email, amount, created_at, active, note, ref"
BASELINES = ("B_json", "B_wire", "R_naive")
MiB = 1024 * 1024
READY = {  # what each role logs once it serves
    "api": "fetcher api on",
    "worker": "fetcher worker consuming",
    "relay": "fetcher relay following",
}


def table_name(rows: int) -> str:
    return f"bench_{rows}"


def pg_url(database: str) -> str:
    return f"{PG}/{database}"


# --- children: one pipeline each, timed after their imports ------------------------------------


def _child_imports() -> Any:
    """The same imports for every child and for the idle reference."""
    import aiobotocore.session  # noqa: F401  (R_naive's PUT: counted in the idle figure too)
    import asyncpg
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from adapters.crypto.keys import KeyRing

    return asyncpg, AESGCM, KeyRing


class _Sink:
    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0

    async def __call__(self, data: bytes) -> None:
        self.bytes += len(data)
        self.lines += data.count(b"\n")


async def register_connection(client: Any) -> None:
    """Registers the benchmark's PostgreSQL connection through the API (an httpx client)."""
    response = await client.post(
        "/v1/management/connections",
        headers={"X-Product-Name": PRODUCT},
        json={
            "configName": CONFIG,
            "type": "POSTGRESQL",
            "host": "127.0.0.1",
            "port": urlsplit(PG).port or 5432,
            "databaseName": DATABASE,
            "userName": urlsplit(PG).username or "postgres",
            "password": "unused",
        },
    )
    if response.status_code != 201:
        raise RuntimeError(f"connection not registered: {response.text}")


async def _copy(table: str, binary: bool) -> dict[str, int]:
    asyncpg, _, _ = _child_imports()
    conn = await asyncpg.connect(pg_url(DATABASE), ssl=False)
    sink = _Sink()
    try:
        if binary:
            query = f"SELECT {COLUMNS} FROM {table}"
            await conn.copy_from_query(query, output=sink, format="binary")
        else:
            query = f"SELECT row_to_json(t) FROM (SELECT {COLUMNS} FROM {table}) t"
            await conn.copy_from_query(query, output=sink)
    finally:
        await conn.close()
    return {"bytes": sink.bytes, "rows": 0 if binary else sink.lines}


def _go_value(value: Any) -> Any:
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    raise TypeError(f"cannot encode {type(value).__name__}")


def _reference_dumps(value: Any) -> str:
    """The reference's document with CPython's C encoder: compact separators, sorted keys.
    (``indent`` would switch to the pure-Python encoder, about 5 times slower, and make the baseline
    a straw man.)"""
    return json.dumps(
        value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=_go_value
    )


def _s3_client() -> Any:
    """An S3 client for R_naive's one PUT, opened before its clock starts (the reference keeps
    one for the life of the process)."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    config = AioConfig(request_checksum_calculation="when_required")
    return get_session().create_client(
        "s3",
        endpoint_url=S3_ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=S3_ACCESS,
        aws_secret_access_key=S3_SECRET,
        config=config,
    )


async def _naive(table: str, sample: list[int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    _, AESGCM, KeyRing = _child_imports()
    keys = KeyRing(os.environ["APP_ENC_KEY"]).current
    async with _s3_client() as s3:
        key = f"bench-naive-{uuid.uuid4().hex}.json"
        await s3.head_bucket(Bucket=S3_BUCKET)  # connected before the clock starts
        try:
            return await _naive_timed(table, sample, keys, AESGCM, s3, key)
        finally:
            await s3.delete_object(Bucket=S3_BUCKET, Key=key)


async def _naive_timed(
    table: str, sample: list[int], keys: Any, AESGCM: Any, s3: Any, key: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import hashlib
    import hmac

    import asyncpg

    stamps = [time.perf_counter()]
    conn = await asyncpg.connect(pg_url(DATABASE), ssl=False)
    try:
        records = await conn.fetch(f"SELECT {COLUMNS} FROM {table}")
    finally:
        await conn.close()
    stamps.append(time.perf_counter())
    rows = [dict(r) for r in records]
    stamps.append(time.perf_counter())
    plaintext = _reference_dumps({CONFIG: {table: rows}}).encode("utf-8")
    stamps.append(time.perf_counter())
    mac = hmac.new(keys.external_hmac, plaintext, hashlib.sha256).hexdigest()
    nonce = os.urandom(12)
    blob = base64.b64encode(nonce + AESGCM(keys.storage).encrypt(nonce, plaintext, None))
    stamps.append(time.perf_counter())
    await s3.put_object(Bucket=S3_BUCKET, Key=key, Body=blob)  # one PutObject, as the reference
    stamps.append(time.perf_counter())
    names = ("fetch", "dicts", "dumps", "seal", "put")
    stages = {name: b - a for name, (a, b) in zip(names, pairwise(stamps), strict=True)}
    out = {
        "seconds": stamps[-1] - stamps[0],
        "stages": stages,
        "bytes": len(plaintext),
        "blob_bytes": len(blob),
        "rows": len(rows),
        "hmac": mac,
    }
    # The sample as this format encodes it (rows are encoded independently in the document).
    wanted = set(sample)
    chosen = json.loads(_reference_dumps([r for r in rows if r["id"] in wanted]))
    return out, chosen


def child(variant: str, table: str, sample: list[int]) -> None:
    _child_imports()
    started = time.perf_counter()
    chosen: list[dict[str, Any]] = []
    if variant == "idle":
        out: dict[str, Any] = {}
    elif variant == "R_naive":
        out, chosen = asyncio.run(_naive(table, sample))
    else:
        out = asyncio.run(_copy(table, binary=variant == "B_wire"))
    out.setdefault("seconds", time.perf_counter() - started)
    # Printed after the peak: the sample is tiny.
    print(json.dumps({**out, "sample": chosen}))


def measure(variant: str, table: str, sample: list[int]) -> None:
    """Wrapper: one child; its peak RSS is this process's RUSAGE_CHILDREN maximum."""
    done = subprocess.run(
        _this("--child", variant, table, sample), stdout=subprocess.PIPE, text=True
    )
    if done.returncode:
        sys.exit(done.returncode)  # the child's traceback went to stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["peak_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps(out))


def _this(mode: str, value: str, table: str, sample: list[int], *extra: str) -> list[str]:
    """This script, run again in one of its internal modes."""
    ids = ",".join(map(str, sample))
    return [sys.executable, __file__, mode, value, "--table", table, "--sample", ids, *extra]


def _run_this(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[2:4])} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_measured(variant: str, table: str, sample: list[int], env: dict[str, str]) -> dict:
    return _run_this(_this("--measure", variant, table, sample), env)


# --- verification of a stored result, in its own process ---------------------------------------


async def _verify(key: str, expected_hmac: str, table: str, sample: list[int]) -> dict:
    import msgspec

    from adapters.crypto.keys import KeyRing
    from adapters.crypto.sealing import open_result
    from adapters.storage.s3 import S3ResultStorage, S3Settings

    keys = KeyRing(os.environ["APP_ENC_KEY"]).current
    s3 = await S3ResultStorage.open(
        S3Settings(
            bucket=S3_BUCKET,
            endpoint_url=S3_ENDPOINT,
            access_key_id=S3_ACCESS,
            secret_access_key=S3_SECRET,
            use_path_style=True,
        )
    )
    try:
        blob = await s3.read(key)
    finally:
        await s3.close()
    plaintext = open_result(blob, keys.storage, keys.external_hmac, expected_hmac)  # HMAC check
    rows = msgspec.json.decode(plaintext)[CONFIG][table]
    wanted = set(sample)
    ids = {r["id"] for r in rows}
    return {
        "rows": len(rows),
        "ids": [len(ids), min(ids, default=0), max(ids, default=0)],
        "bytes": len(plaintext),
        "sample": [r for r in rows if r["id"] in wanted],
    }


def verify(key: str, expected_hmac: str, table: str, sample: list[int], env: dict) -> dict:
    return _run_this(_this("--verify", key, table, sample, "--hmac", expected_hmac), env)


def parsed(row: dict[str, Any]) -> tuple[Any, ...]:
    """One row as values, whatever the byte format that carried it."""
    return (
        int(row["id"]),
        row["email"],
        Decimal(row["amount"]),
        datetime.fromisoformat(row["created_at"]),
        row["active"],
        row["note"],
        None if row["ref"] is None else uuid.UUID(row["ref"]),
    )


def same_sample(a: list[dict[str, Any]], b: list[dict[str, Any]], size: int) -> bool:
    return len(a) == len(b) == size and sorted(map(parsed, a)) == sorted(map(parsed, b))


# --- the source table ---------------------------------------------------------------------------


async def prepare(rows: int) -> None:
    import asyncpg

    admin = await asyncpg.connect(pg_url("postgres"), ssl=False)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
            await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    table = table_name(rows)
    conn = await asyncpg.connect(pg_url(DATABASE), ssl=False)
    try:
        await ensure_source_table(conn, table, rows)
    finally:
        await conn.close()


async def _admin(sql: str) -> None:
    import asyncpg

    admin = await asyncpg.connect(pg_url("postgres"), ssl=False)
    try:
        await admin.execute(sql)
    finally:
        await admin.close()


# --- the candidate: the service's own processes ------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """VmHWM/VmRSS in KiB and CPU seconds (user + system) of a process."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            out[name] = int(value.split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out["cpu_ticks"] = int(fields[11]) + int(fields[12])
    return out


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        return proc_status(pid)["cpu_ticks"] / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, KeyError):
        return 0.0


def s3_server_pid() -> int | None:
    """The nanio process deploy/services.sh started, read only for its CPU time."""
    port = urlsplit(S3_ENDPOINT).port or 80
    roots = [ROOT]
    with suppress(OSError, subprocess.CalledProcessError):  # a worktree: the main checkout's
        roots.append(
            Path(_git("rev-parse", "--path-format=absolute", "--git-common-dir").strip()).parent
        )
    for root in roots:
        with suppress(OSError, ValueError):
            pid = int((root / ".ci-state" / f"nanio-{port}.pid").read_text().strip())
            if Path(f"/proc/{pid}").exists():
                return pid
    return None


def provision_broker(env: dict[str, str]) -> None:
    """The broker topology as an operator provisions it (the roles declare nothing unless
    FETCHER_BROKER_DECLARE_TOPOLOGY says so), without the example event queues, so the broker
    keeps none of the runs' events. On a thread of its own: callers may run an event loop."""
    from concurrent.futures import ThreadPoolExecutor

    from adapters.messaging.rabbitmq_topology import RabbitTopology

    topology = RabbitTopology(
        work_queue=env["RABBITMQ_FETCHER_WORK_QUEUE"],
        events_exchange=env["RABBITMQ_JOB_EVENTS_EXCHANGE"],
        event_queues=(),
    )
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, topology.apply(env["RABBITMQ_URL"])).result()


class Service:
    """``fetcher api``, ``worker`` and ``relay`` on their own event-store database."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.api = f"http://{env['SERVER_ADDRESS']}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        """The api first, ready, then worker and relay: roles that start at the same moment on
        a fresh event store can race creating its tables (see benchmarks/README.md)."""
        provision_broker(self.env)
        self._spawn("api")
        self._wait_ready(("api",))
        self._spawn("worker")
        self._spawn("relay")
        self._wait_ready(("worker", "relay"))

    def _spawn(self, role: str) -> None:
        with socket.socket() as sock:  # worker and relay each answer probes on a port of their own
            sock.bind(("127.0.0.1", 0))
            health_port = sock.getsockname()[1]
        with open(self.logs / f"{role}.log", "wb") as log:
            self.procs[role] = subprocess.Popen(
                [FETCHER, role],
                cwd=self.env.get("FETCHER_BENCH_TREE", ROOT),
                env={**self.env, "HEALTH_PORT": str(health_port), "READYZ_DRAIN_DELAY_SEC": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _wait_ready(self, roles: tuple[str, ...], timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for role, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"fetcher {role} exited early:\n{self.tail()}")
            logged = all(READY[r] in (self.logs / f"{r}.log").read_text() for r in roles)
            with suppress(httpx.HTTPError):
                if logged and httpx.get(f"{self.api}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"fetcher did not become ready:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout


class Run:
    """What one benchmark run owns, and removes at the end."""

    def __init__(self, at: str | None) -> None:
        head = _git("rev-parse", "--short", at or "HEAD").strip()
        self.id = uuid.uuid4().hex[:10]
        self.master_key = base64.b64encode(os.urandom(32)).decode()
        self.prefix = f"bench-{self.id}/"
        self.work_queue = f"fetcher.bench.{self.id}.queue"
        self.events_exchange = f"fetcher.bench.{self.id}.events"
        self.logs = Path(tempfile.mkdtemp(prefix=f"fetcher-bench-{self.id}-"))
        self.stores = 0
        self.env = {**os.environ, "APP_ENC_KEY": self.master_key}  # children and tools
        self.tree: Path | None = None
        if at:
            # The service as committed, whatever the working tree holds meanwhile.
            self.tree = self.logs / "tree"
            self.tree.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", head], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(self.tree)], input=archive, check=True)
            self.env.update(FETCHER_BENCH_TREE=str(self.tree), PYTHONPATH=str(self.tree))
            self.measured = f"commit {head}"
        else:
            dirty = _git("status", "--porcelain", "--untracked-files=no").strip()
            self.measured = f"working tree at {head}" + (" with uncommitted changes" * bool(dirty))

    def service_env(self, store_db: str) -> dict[str, str]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FETCHER_", "RABBITMQ_", "OBJECT_STORAGE_", "APP_ENC", "ENGINE_"))
        }
        return {
            **inherited,
            **{k: self.env[k] for k in ("FETCHER_BENCH_TREE", "PYTHONPATH") if self.tree},
            "APP_ENC_KEY": self.master_key,
            "LOG_LEVEL": "INFO",
            "FETCHER_DATABASE_URL": pg_url(store_db),
            "FETCHER_DATA_DIR": str(self.logs / "data"),
            "RABBITMQ_URL": RABBIT,
            "RABBITMQ_FETCHER_WORK_QUEUE": self.work_queue,
            "RABBITMQ_JOB_EVENTS_EXCHANGE": self.events_exchange,
            "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
            "OBJECT_STORAGE_BUCKET": S3_BUCKET,
            "OBJECT_STORAGE_KEY_PREFIX": self.prefix,
            "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS,
            "OBJECT_STORAGE_SECRET_KEY": S3_SECRET,
            "OBJECT_STORAGE_USE_PATH_STYLE": "true",
            "ENGINE_MAX_RESULT_BYTES": str(4 * 1024 * MiB),  # lets --rows go past 1.39 M
            "SERVER_ADDRESS": f"127.0.0.1:{port}",
        }

    async def cleanup(self) -> None:
        import aio_pika
        from aiobotocore.session import get_session

        with suppress(Exception):
            connection = await aio_pika.connect(RABBIT)
            async with connection:
                channel = await connection.channel()
                with suppress(Exception):
                    await channel.queue_delete(self.work_queue)
                with suppress(Exception):
                    await channel.exchange_delete(self.events_exchange)
        async with get_session().create_client(
            "s3",
            endpoint_url=S3_ENDPOINT,
            region_name="us-east-1",
            aws_access_key_id=S3_ACCESS,
            aws_secret_access_key=S3_SECRET,
        ) as s3:
            paginator = s3.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=S3_BUCKET, Prefix=self.prefix):
                for item in page.get("Contents", []):
                    await s3.delete_object(Bucket=S3_BUCKET, Key=item["Key"])


async def _submit(client: Any, table: str, tag: str, filters: dict | None = None) -> str:
    mapped = {CONFIG: {f"public.{table}": ["*"]}}
    request: dict[str, Any] = {"mappedFields": mapped}
    if filters:
        request["filters"] = {CONFIG: {f"public.{table}": filters}}
    response = await client.post(
        "/v1/fetcher", json={"dataRequest": request, "metadata": {"source": PRODUCT, "tag": tag}}
    )
    if response.status_code != 202:
        raise RuntimeError(f"job not accepted: {response.status_code} {response.text}")
    return str(response.json()["jobId"])


async def _event(events: asyncio.Queue, job_id: str, service: Service, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"no event for job {job_id} within {timeout:.0f}s\n{service.tail()}")
        try:
            received, message = await asyncio.wait_for(events.get(), left)
        except TimeoutError:
            continue
        body = json.loads(message.body)
        if body.get("jobId") == job_id:
            if message.routing_key != "job.completed":
                raise RuntimeError(f"job {job_id} ended {message.routing_key}: {body}")
            return received, body


async def _candidate(run: Run, service: Service, table: str, rows: int) -> dict[str, Any]:
    import aio_pika
    import httpx

    connection = await aio_pika.connect(RABBIT)
    async with connection, httpx.AsyncClient(base_url=service.api, timeout=60) as client:
        channel = await connection.channel()
        exchange = await channel.get_exchange(run.events_exchange)
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(exchange, routing_key="job.*")
        events: asyncio.Queue = asyncio.Queue()

        async def on_message(message: Any) -> None:
            received = time.time()
            async with message.process():
                events.put_nowait((received, message))

        await queue.consume(on_message)
        await register_connection(client)
        warm = await _submit(client, table, "warm-up", {"id": {"lte": [10]}})
        await _event(events, warm, service, 60)

        worker, s3_pid = service.procs["worker"].pid, s3_server_pid()
        profiler = profile(worker)
        before, s3_before = proc_status(worker), cpu_seconds(s3_pid)
        posted = time.time()
        started = time.perf_counter()
        job_id = await _submit(client, table, "measured")
        received, body = await _event(events, job_id, service, 600)
        seconds = time.perf_counter() - started
        after, s3_after = proc_status(worker), cpu_seconds(s3_pid)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
            profiler.wait(30)
        history = (await client.get(f"/v1/fetcher/{job_id}/events")).json()["events"]
    stamps = {e["type"]: datetime.fromisoformat(e["timestamp"]).timestamp() for e in history}
    ticks = os.sysconf("SC_CLK_TCK")
    result = body["result"]
    if result["rowCount"] != rows:
        raise RuntimeError(f"job {job_id} reported {result['rowCount']} rows, expected {rows}")
    return {
        "seconds": seconds,
        "hwm_before_kib": before["VmHWM"],
        "hwm_after_kib": after["VmHWM"],
        "rss_after_kib": after["VmRSS"],
        "worker_cpu": (after["cpu_ticks"] - before["cpu_ticks"]) / ticks,
        "s3_cpu": s3_after - s3_before,
        "dispatch": stamps["Claimed"] - stamps["Requested"],
        "run": stamps["Completed"] - stamps["Claimed"],
        "emit": received - stamps["Completed"],
        "accept": stamps["Requested"] - posted,
        "key": run.prefix + result["path"],
        "hmac": result["hmac"],
        "bytes": result["sizeBytes"],
        "rows": result["rowCount"],
    }


PROFILE_DIR: Path | None = None
_profiles = 0


def profile(pid: int) -> subprocess.Popen[bytes] | None:
    """With ``--profile DIR``: py-spy samples the worker during the measured job (collapsed
    stacks of the thread holding the GIL, one file per candidate round in ``DIR``)."""
    global _profiles
    if PROFILE_DIR is None:
        return None
    _profiles += 1
    PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    out = PROFILE_DIR / f"worker-{_profiles}.txt"
    print(f"  profiling the worker into {out}", file=sys.stderr)
    spy = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            *("record", "--pid", str(pid), "--rate", "250", "--format", "raw"),
            *("--output", str(out), "--nonblocking", "--gil"),
        ],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches before the job starts
    return spy


CANDIDATES = {
    "candidate": {},
    # The same service with PostgreSQL building the JSON where it can (FETCHER_PG_SERVER_JSON).
    "cand_server": {"FETCHER_PG_SERVER_JSON": "true"},
}


def candidate_round(
    run: Run, table: str, rows: int, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Fresh event store and processes for one measured job; all removed again."""
    run.stores += 1
    store_db = f"fetcher_bench_store_{run.id}_{run.stores}"
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))
    asyncio.run(_admin(f'CREATE DATABASE "{store_db}"'))
    logs = run.logs / f"round-{run.stores}"
    logs.mkdir()
    service = Service({**run.service_env(store_db), **(extra_env or {})}, logs)
    try:
        service.start()
        return asyncio.run(_candidate(run, service, table, rows))
    finally:
        service.stop()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))


# --- rounds and report --------------------------------------------------------------------------


def sample_ids(rows: int) -> list[int]:
    picked = {1, 2, 3, rows // 3, rows // 2, rows - 1, rows}
    picked.update(random.Random(rows).sample(range(1, rows + 1), min(rows, 25)))
    return sorted(i for i in picked if 1 <= i <= rows)


def one_round(run: Run, rows: int, variants: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    table = table_name(rows)
    sample = sample_ids(rows)
    results: dict[str, dict[str, Any]] = {}
    for variant in variants:
        if variant in CANDIDATES:
            out = candidate_round(run, table, rows, CANDIDATES[variant])
            checked = verify(out["key"], out["hmac"], table, sample, run.env)
            expected = {"rows": rows, "ids": [rows, 1, rows], "bytes": out["bytes"]}
            if any(checked[k] != v for k, v in expected.items()):
                raise RuntimeError(f"candidate result does not match: {checked}")
            out["verified"] = "hmac+rows"
            if "R_naive" in results:
                if not same_sample(checked["sample"], results["R_naive"]["sample"], len(sample)):
                    raise RuntimeError("candidate and R_naive disagree on the sampled rows")
                out["verified"] += f"+{len(checked['sample'])} rows = R_naive"
        else:
            out = run_measured(variant, table, sample, run.env)
            if variant != "B_wire" and out["rows"] != rows:
                raise RuntimeError(f"{variant} produced {out['rows']} rows, expected {rows}")
        results[variant] = out
        print(f"  {variant:<10} {describe(variant, out)}", file=sys.stderr, flush=True)
    return results


def describe(variant: str, out: dict[str, Any]) -> str:
    if variant not in CANDIDATES:
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in out.get("stages", {}).items())
        return f"{out['seconds']:6.2f} s  peak {out['peak_kib'] / 1024:7.1f} MiB  {stages}"
    return (
        f"{out['seconds']:6.2f} s  worker VmHWM {out['hwm_before_kib'] / 1024:.0f} → "
        f"{out['hwm_after_kib'] / 1024:.0f} MiB (+{peak_mib(out):.1f}), VmRSS after "
        f"{out['rss_after_kib'] / 1024:.0f} MiB; accept {out['accept']:.2f} s, dispatch "
        f"{out['dispatch']:.2f} s, run {out['run']:.2f} s, emit {out['emit']:.2f} s; CPU "
        f"worker {out['worker_cpu']:.2f} s, S3 server {out['s3_cpu']:.2f} s; {out['verified']}"
    )


def peak_mib(out: dict[str, Any], idle_kib: float = 0) -> float:
    if "hwm_after_kib" in out:
        return (out["hwm_after_kib"] - out["hwm_before_kib"]) / 1024
    return (out["peak_kib"] - idle_kib) / 1024


def idle_peak(run: Run) -> float:
    return float(run_measured("idle", "none", [], run.env)["peak_kib"])


def benchmark(run: Run, rows: int, rounds: int, server_too: bool = False) -> None:
    asyncio.run(prepare(rows))
    variants = (*BASELINES, "candidate", *(("cand_server",) if server_too else ()))
    history: list[dict[str, dict[str, Any]]] = []
    idles: list[float] = []
    for number in range(1, rounds + 1):
        print(f"round {number}/{rounds} ({rows:,} rows)", file=sys.stderr, flush=True)
        idles.append(idle_peak(run))
        history.append(one_round(run, rows, variants))
    idle = statistics.median(idles)

    print(
        f"\nOne job over {rows:,} rows ({COLUMNS}); {rounds} round(s), interleaved "
        f"{' '.join(variants)}; idle interpreter {idle / 1024:.1f} MiB"
    )
    print(f"{'round':<7}" + "".join(f"{v:>22}" for v in variants))
    for number, results in enumerate(history, 1):
        print(
            f"{number:<7}"
            + "".join(
                f"{results[v]['seconds']:>10.2f} s {peak_mib(results[v], idle):>6.0f} MiB"
                for v in variants
            )
        )
    ratios = {
        "candidate / B_json": ("candidate", "B_json"),
        "candidate / B_wire": ("candidate", "B_wire"),
        "candidate / R_naive": ("candidate", "R_naive"),
        "R_naive / B_json": ("R_naive", "B_json"),
    }
    if server_too:
        ratios["cand_server / B_json"] = ("cand_server", "B_json")
        ratios["cand_server / candidate"] = ("cand_server", "candidate")
    print("\nmedian of per-round time ratios")
    for label, (top, bottom) in ratios.items():
        per_round = [r[top]["seconds"] / r[bottom]["seconds"] for r in history]
        shown = ", ".join(f"{x:.2f}" for x in per_round)
        print(f"  {label:<22}{statistics.median(per_round):>6.2f}   ({shown})")
    print(
        "\npeak memory, median over rounds (baselines: above an idle interpreter; candidate: "
        "worker VmHWM growth during the job)"
    )
    for variant in variants:
        peaks = [peak_mib(r[variant], idle) for r in history]
        print(f"  {variant:<12}{statistics.median(peaks):>8.1f} MiB")
    c = history[-1]["candidate"]
    print(
        f"\ncandidate result: {c['bytes'] / MiB:.1f} MiB of JSON, {c['rows']:,} rows; "
        f"verified {c['verified']}"
    )
    for label, key in (
        ("accept", "accept"),
        ("dispatch", "dispatch"),
        ("run", "run"),
        ("emit", "emit"),
        ("worker CPU", "worker_cpu"),
        ("S3 CPU", "s3_cpu"),
    ):
        print(f"  {label:<12}{statistics.median(r['candidate'][key] for r in history):>6.2f} s")


def memory_scaling(run: Run, rounds: int) -> None:
    sizes = (100_000, 1_000_000)
    for rows in sizes:
        asyncio.run(prepare(rows))
    peaks: dict[tuple[str, int], list[float]] = {}
    times: dict[tuple[str, int], list[float]] = {}
    for number in range(1, rounds + 1):
        idle = idle_peak(run)
        for rows in sizes:
            print(f"round {number}/{rounds} ({rows:,} rows)", file=sys.stderr, flush=True)
            for variant, out in one_round(run, rows, ("R_naive", "candidate")).items():
                peaks.setdefault((variant, rows), []).append(peak_mib(out, idle))
                times.setdefault((variant, rows), []).append(out["seconds"])
    print(f"\nPeak memory against row count ({rounds} round(s), medians)")
    print(f"{'':<12}" + "".join(f"{rows:>22,}" for rows in sizes) + f"{'1M / 100k':>12}")
    for variant in ("candidate", "R_naive"):
        cells = [statistics.median(peaks[variant, rows]) for rows in sizes]
        secs = [statistics.median(times[variant, rows]) for rows in sizes]
        print(
            f"{variant:<12}"
            + "".join(f"{p:>10.1f} MiB {s:>6.2f} s" for p, s in zip(cells, secs, strict=True))
            + f"{cells[1] / cells[0] if cells[0] else float('nan'):>11.1f}x"
        )
    print(
        "candidate: worker VmHWM growth during the job (warmed-up worker); "
        "R_naive: peak above an idle interpreter"
    )


def require_servers() -> None:
    for url, what in ((PG, "PostgreSQL"), (RABBIT, "RabbitMQ"), (S3_ENDPOINT, "the S3 server")):
        parts = urlsplit(url)
        try:
            socket.create_connection((parts.hostname, parts.port or 80), timeout=2).close()
        except OSError:
            sys.exit(f"{what} is not reachable at {url}; run `bash deploy/services.sh start`")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-scaling", action="store_true")
    parser.add_argument(
        "--server-too",
        action="store_true",
        help="also run the service with FETCHER_PG_SERVER_JSON=true (variant cand_server)",
    )
    parser.add_argument(
        "--at",
        metavar="REV",
        help="run the service as committed at REV (git archive), not the "
        "working tree (which others may be editing)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="py-spy the worker during each measured job into DIR (dev extra)",
    )
    parser.add_argument("--child", choices=(*BASELINES, "idle"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", choices=(*BASELINES, "idle"), help=argparse.SUPPRESS)
    parser.add_argument("--verify", help=argparse.SUPPRESS)
    parser.add_argument("--hmac", help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--sample", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sample = [int(i) for i in args.sample.split(",") if i]
    if args.child:
        child(args.child, args.table, sample)
        return
    if args.measure:
        measure(args.measure, args.table, sample)
        return
    if args.verify:
        print(json.dumps(asyncio.run(_verify(args.verify, args.hmac, args.table, sample))))
        return
    if args.rows < 10:
        parser.error("--rows must be at least 10")
    require_servers()
    global PROFILE_DIR
    PROFILE_DIR = args.profile
    run = Run(args.at)
    print(f"run {run.id}: {run.measured}; logs in {run.logs}", file=sys.stderr)
    ok = False
    try:
        if args.memory_scaling:
            memory_scaling(run, args.rounds)
        else:
            benchmark(run, args.rows, args.rounds, args.server_too)
        print(f"\nmeasured: {run.measured}")
        ok = True
    finally:
        asyncio.run(run.cleanup())
        if ok:
            shutil.rmtree(run.logs, ignore_errors=True)
        else:
            print(f"logs kept in {run.logs}", file=sys.stderr)


if __name__ == "__main__":
    main()
