"""Small jobs through the distributed roles: how many complete per second, for 1, 2 and 4 workers.

For each worker count, on a fresh event-store database, RabbitMQ work queue and events exchange
and nanio key prefix, the script starts ``fetcher api`` and ``fetcher relay`` and registers a
PostgreSQL connection to a 10-row table (``bench_10`` in ``fetcher_bench``). Then:

  drain  ``--jobs`` distinct requests (each its own ``id <= n`` filter, every one reading the 10
         rows) are POSTed by ``--clients`` concurrent clients while no worker runs, so the relay
         queues them all. Then the workers start. Throughput = completed jobs per second between
         the first and the last ``job.completed`` received on a queue bound to the events
         exchange: what the workers, the relay's emitter and the event store sustain with a
         backlog, submission excluded.
  live   with the workers running, ``--live`` more distinct requests are POSTed by the same
         clients; it reports jobs per second from the first POST to the last event and the p50 /
         p99 of POST → event. Submission is part of this figure (the API's own benchmark is
         another engineer's; this column shows what a user sees end to end).

Per job it also prints the median of the job's own event timestamps (Claimed → Completed: the
worker's time on the job, discovery, extraction, upload and its append included) and the CPU
each process used per drained job (from ``/proc/<pid>/stat``).

Everything the run creates is removed at the end (processes, databases, the queue, the
exchange, the S3 objects). Logs stay in ``/tmp/fetcher-bench-<id>-*`` when a run fails.

Usage: .venv/bin/python benchmarks/bench_throughput.py [--workers 1,2,4] [--jobs 300]
       [--live 200] [--clients 32] [--concurrency N] [--at REV] [--spans] [--profile DIR]
``--spans`` has the workers print their spans (console exporter) and reports each span's median;
``--profile DIR`` samples the first worker and the relay with py-spy while they drain.
The machine is shared: run it under ``nice`` and read ``uptime`` (printed) with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_job import (
    CONFIG,
    DATABASE,
    FETCHER,
    PRODUCT,
    RABBIT,
    READY,
    ROOT,
    Run,
    _admin,
    cpu_seconds,
    pg_url,
    provision_broker,
    register_connection,
    s3_server_pid,
)
from source_table import ensure_source_table

ROWS = 10
REFUSED = [0]
"""POSTs refused with FET-1040 or FET-0003 (an overloaded API) and retried."""
TABLE = f"bench_{ROWS}"


class Roles:
    """``fetcher api`` and ``relay``, then ``workers`` workers, on one event-store database."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.api = f"http://{env['SERVER_ADDRESS']}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, extra: dict[str, str] | None = None) -> None:
        role = name.split("-")[0]
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            health_port = sock.getsockname()[1]
        with open(self.logs / f"{name}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(
                ["nice", "-n", "5", FETCHER, role],
                cwd=self.env.get("FETCHER_BENCH_TREE", ROOT),
                env={
                    **self.env,
                    **(extra or {}),
                    "HEALTH_PORT": str(health_port),
                    "READYZ_DRAIN_DELAY_SEC": "1",
                },
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, names: list[str], timeout: float = 90.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"fetcher {name} exited early:\n{self.tail()}")
            logged = all(
                READY[n.split("-")[0]] in (self.logs / f"{n}.log").read_text() for n in names
            )
            with suppress(httpx.HTTPError):
                if logged and httpx.get(f"{self.api}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"fetcher did not become ready:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )

    def cpu(self) -> dict[str, float]:
        out = {name: cpu_seconds(proc.pid) for name, proc in self.procs.items()}
        out["s3"] = cpu_seconds(s3_server_pid())
        return out

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


async def _prepare_source() -> None:
    import asyncpg

    admin = await asyncpg.connect(pg_url("postgres"), ssl=False)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
            await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(pg_url(DATABASE), ssl=False)
    try:
        await ensure_source_table(conn, TABLE, ROWS)
    finally:
        await conn.close()


class Events:
    """``job.*`` events of the run's exchange, on a queue of their own, with their arrival."""

    def __init__(self) -> None:
        self.arrived: dict[str, tuple[float, str]] = {}
        self.changed = asyncio.Event()

    async def start(self, channel: Any, exchange_name: str) -> None:
        exchange = await channel.get_exchange(exchange_name)
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(exchange, routing_key="job.*")

        async def on_message(message: Any) -> None:
            received = time.perf_counter()
            async with message.process():
                body = json.loads(message.body)
                self.arrived[str(body.get("jobId"))] = (received, message.routing_key)
                self.changed.set()

        await queue.consume(on_message)

    async def wait_for(self, ids: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while any(i not in self.arrived for i in ids):
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sum(i not in self.arrived for i in ids)
                raise RuntimeError(f"{missing} of {len(ids)} jobs had no event in {timeout:.0f}s")
            self.changed.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
        failed = [i for i in ids if self.arrived[i][1] != "job.completed"]
        if failed:
            raise RuntimeError(f"{len(failed)} jobs did not complete, e.g. {failed[0]}")


async def _post_all(client: Any, first: int, count: int, clients: int) -> list[tuple[str, float]]:
    """POSTs ``count`` distinct requests with ``clients`` concurrent clients; (job id, POST
    start) each."""
    numbers = iter(range(first, first + count))
    out: list[tuple[str, float]] = []

    async def one_client() -> None:
        for n in numbers:
            request = {
                "mappedFields": {CONFIG: {f"public.{TABLE}": ["*"]}},
                "filters": {CONFIG: {f"public.{TABLE}": {"id": {"lte": [ROWS + n]}}}},
            }
            started = time.perf_counter()
            for attempt in range(10):
                response = await client.post(
                    "/v1/fetcher", json={"dataRequest": request, "metadata": {"source": PRODUCT}}
                )
                # FET-1040 (the API's connection test timed out) and FET-0003 (503, the API
                # shed the request): an overloaded machine; counted and retried, as a client would.
                if not any(code in response.text for code in ("FET-1040", "FET-0003")):
                    break
                REFUSED[0] += 1
                await asyncio.sleep(0.5 * (attempt + 1))
            if response.status_code != 202:
                raise RuntimeError(f"job not accepted: {response.status_code} {response.text}")
            out.append((str(response.json()["jobId"]), started))

    await asyncio.gather(*(one_client() for _ in range(clients)))
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _history(client: Any, job_ids: list[str]) -> list[dict[str, float]]:
    out = []
    for job_id in job_ids:
        events = (await client.get(f"/v1/fetcher/{job_id}/events")).json()["events"]
        out.append({e["type"]: datetime.fromisoformat(e["timestamp"]).timestamp() for e in events})
    return out


async def _measure(run: Run, roles: Roles, workers: int, args: argparse.Namespace) -> dict:
    import aio_pika
    import httpx

    limits = httpx.Limits(max_connections=args.clients)
    connection = await aio_pika.connect(RABBIT)
    async with (
        connection,
        httpx.AsyncClient(base_url=roles.api, timeout=120, limits=limits) as client,
    ):
        channel = await connection.channel()
        events = Events()
        await events.start(channel, run.events_exchange)
        await register_connection(client)

        # drain: a backlog first, then the workers
        posted = await _post_all(client, 0, args.jobs, args.clients)
        drain_ids = [job_id for job_id, _ in posted]
        names = [f"worker-{i}" for i in range(workers)]
        extra = {"OTEL_TRACES_EXPORTER": "console"} if args.spans else {}
        if args.concurrency:
            extra["RABBITMQ_NUMBERS_OF_WORKERS"] = str(args.concurrency)
        for name in names:
            roles.spawn(name, extra)
        roles.wait_ready(names)
        cpu_before = roles.cpu()
        profilers = [_profiler(roles, name, args.profile) for name in (names[0], "relay")]
        await events.wait_for(drain_ids, 60 + args.jobs)
        cpu_after = roles.cpu()
        for profiler in profilers:
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(timeout=30)
        arrivals = sorted(events.arrived[i][0] for i in drain_ids)
        drain_rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
        sample = drain_ids[:: max(1, len(drain_ids) // 25)]
        stamps = await _history(client, sample)

        # live: workers running, submission included
        started = time.perf_counter()
        live = await _post_all(client, args.jobs, args.live, args.clients)
        live_ids = [job_id for job_id, _ in live]
        await events.wait_for(live_ids, 60 + args.live)
        latencies = [events.arrived[i][0] - t for i, t in live]
        live_end = max(events.arrived[i][0] for i in live_ids)
    stages = _span_medians([roles.logs / f"{n}.log" for n in names]) if args.spans else {}
    per_job = {
        name: (cpu_after[name] - cpu_before.get(name, 0.0)) / args.jobs * 1000 for name in cpu_after
    }
    worker_cpu = sum(v for k, v in per_job.items() if k.startswith("worker"))
    return {
        "workers": workers,
        "drain_rate": drain_rate,
        "run_ms": statistics.median(
            (s["Completed"] - s["Claimed"]) * 1000 for s in stamps if "Completed" in s
        ),
        "live_rate": len(live_ids) / (live_end - started),
        "live_p50_ms": _percentile(latencies, 0.5) * 1000,
        "live_p99_ms": _percentile(latencies, 0.99) * 1000,
        "stages_ms": stages,
        "cpu_ms": {
            "workers": worker_cpu,
            "relay": per_job.get("relay", 0.0),
            "api": per_job.get("api", 0.0),
            "s3": per_job.get("s3", 0.0),
        },
    }


def _profiler(roles: Roles, name: str, folder: str | None) -> subprocess.Popen[bytes] | None:
    """py-spy sampling ``name`` into ``folder/<name>.txt`` (collapsed stacks) until SIGINT."""
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    out = Path(folder) / f"{name}-{len(roles.procs)}.txt"
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    command = [spy, "record", "--pid", str(roles.procs[name].pid), "--format", "raw"]
    command += ["--rate", "200", "--nonblocking", "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _span_medians(logs: list[Path]) -> dict[str, float]:
    """Median duration in ms of each span name the workers printed (console exporter)."""
    decoder = json.JSONDecoder()
    durations: dict[str, list[float]] = {}
    for log in logs:
        text = log.read_text(errors="replace")
        at = text.find('{\n    "name"')
        while at >= 0:
            try:
                span, end = decoder.raw_decode(text, at)
            except ValueError:
                end = at + 1
            else:
                begin = datetime.fromisoformat(span["start_time"].replace("Z", "+00:00"))
                finish = datetime.fromisoformat(span["end_time"].replace("Z", "+00:00"))
                took = (finish - begin).total_seconds() * 1000
                durations.setdefault(span["name"], []).append(took)
            at = text.find('{\n    "name"', end)
    return {name: statistics.median(values) for name, values in sorted(durations.items())}


def one_config(run: Run, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    run.stores += 1
    store_db = f"fetcher_bench_store_{run.id}_{run.stores}"
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))
    asyncio.run(_admin(f'CREATE DATABASE "{store_db}"'))
    logs = run.logs / f"workers-{workers}"
    logs.mkdir()
    env = run.service_env(store_db)
    # Each configuration its own queue and exchange, so no job of an earlier one lingers.
    env["RABBITMQ_FETCHER_WORK_QUEUE"] = f"{run.work_queue}.{workers}"
    env["RABBITMQ_JOB_EVENTS_EXCHANGE"] = f"{run.events_exchange}.{workers}"
    provision_broker(env)
    roles = Roles(env, logs)
    events_exchange, run.events_exchange = run.events_exchange, env["RABBITMQ_JOB_EVENTS_EXCHANGE"]
    try:
        roles.spawn("api")
        roles.wait_ready(["api"])
        roles.spawn("relay")
        roles.wait_ready(["relay"])
        return asyncio.run(_measure(run, roles, workers, args))
    except BaseException:
        print(roles.tail(), file=sys.stderr)
        raise
    finally:
        run.events_exchange = events_exchange
        roles.stop()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))
        asyncio.run(_cleanup_broker(env))


async def _cleanup_broker(env: dict[str, str]) -> None:
    import aio_pika

    with suppress(Exception):
        connection = await aio_pika.connect(RABBIT)
        async with connection:
            channel = await connection.channel()
            with suppress(Exception):
                await channel.queue_delete(env["RABBITMQ_FETCHER_WORK_QUEUE"])
            with suppress(Exception):
                await channel.exchange_delete(env["RABBITMQ_JOB_EVENTS_EXCHANGE"])


def report(results: list[dict[str, Any]], args: argparse.Namespace, run: Run) -> None:
    print(f"\nsmall jobs ({ROWS} rows), {args.jobs} drained + {args.live} live per row, "
          f"{args.clients} clients; measured: {run.measured}")  # fmt: skip
    print(f"load average before: {args.load_before}; after: {os.getloadavg()}")
    if args.concurrency:
        print(f"each worker runs {args.concurrency} jobs at once")
    if REFUSED[0]:
        print(f"{REFUSED[0]} POSTs refused with FET-1040/FET-0003 (overloaded API), retried")
    head = (
        "| workers | drain jobs/s | scaling | worker run p50 | live jobs/s | live p50 | live p99 "
        "| CPU ms/job: workers, relay, api, S3 |"
    )
    print(head)
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    base = results[0]["drain_rate"] if results else 1.0
    for r in results:
        cpu = r["cpu_ms"]
        print(
            f"| {r['workers']} | {r['drain_rate']:.1f} | {r['drain_rate'] / base:.2f}x "
            f"| {r['run_ms']:.0f} ms | {r['live_rate']:.1f} | {r['live_p50_ms']:.0f} ms "
            f"| {r['live_p99_ms']:.0f} ms | {cpu['workers']:.1f}, {cpu['relay']:.1f}, "
            f"{cpu['api']:.1f}, {cpu['s3']:.1f} |"
        )
    for r in results:
        if r["stages_ms"]:
            spans = ", ".join(f"{k} {v:.1f}" for k, v in r["stages_ms"].items())
            print(f"spans of {r['workers']} worker(s), median ms: {spans}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--live", type=int, default=200)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--at", default=None)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="jobs each worker runs at once (RABBITMQ_NUMBERS_OF_WORKERS; default: the service's)",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy the first worker and the relay while draining"
    )
    parser.add_argument(
        "--spans", action="store_true", help="workers print their spans; report their medians"
    )
    args = parser.parse_args()
    args.load_before = os.getloadavg()
    asyncio.run(_prepare_source())
    run = Run(args.at)
    results = []
    try:
        for workers in (int(w) for w in args.workers.split(",")):
            print(f"{workers} worker(s) ...", file=sys.stderr)
            results.append(one_config(run, workers, args))
            print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        asyncio.run(run.cleanup())
    report(results, args, run)


if __name__ == "__main__":
    main()
