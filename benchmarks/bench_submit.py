"""Submission: distinct ``POST /v1/fetcher`` requests from concurrent clients to one ``fetcher
api`` process, against a trivial Litestar endpoint served the same way, measured in one run.

Each round, interleaved:

  trivial    a Litestar app with one ``POST /v1/fetcher`` handler that decodes the body and
             answers 202 with a new id, served by uvicorn as the roles serve (httptools on
             uvloop) in its own process: the ceiling of the HTTP stack and of this load
             generator on this machine
  service    ``fetcher api`` on a fresh event-store database (PostgreSQL), RabbitMQ, with one
             registered PostgreSQL connection to a 10-row table; every request is distinct
             (its own ``metadata.tag``), so each one is validated, deduplicated, its connection
             checked and its job recorded

Both get ``--clients`` connections (default 32), each sending its next request as soon as the
last was answered, for ``--seconds``. Printed: requests/s, p50 and p99 latency, and the ratio
service / trivial; also one request alone (sequential, no concurrency). Every answer must be 202.
The load (``os.getloadavg``) is printed, since the machine may be shared.

Needs PostgreSQL and RabbitMQ as ``bench_job.py`` does (nanio is not used).
Usage: nice .venv/bin/python benchmarks/bench_submit.py [--clients 32] [--seconds 8] [--rounds 2]
       [--at REV]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_job import (
    CONFIG,
    PRODUCT,
    Run,
    Service,
    _admin,
    cpu_seconds,
    prepare,
    provision_broker,
    register_connection,
    table_name,
)
from load import (
    HttpConnection,
    LoadResult,
    closed_loop,
    load_average,
    median,
    ms,
    open_loop,
    percentile,
)

ROWS = 10
PROFILE = False

TRIVIAL_APP = textwrap.dedent(
    """
    import sys, uuid
    import uvicorn
    from litestar import Litestar, post

    @post("/v1/fetcher", status_code=202)
    async def submit(data: dict) -> dict:
        return {"jobId": str(uuid.uuid4()), "status": "pending"}

    uvicorn.run(Litestar([submit]), host="127.0.0.1", port=int(sys.argv[1]),
                loop="uvloop", http="httptools", log_level="warning", access_log=False)
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job_body(table: str, run_id: str) -> Any:
    mapped = {CONFIG: {f"public.{table}": ["*"]}}

    def body(n: int) -> Any:
        return {
            "dataRequest": {"mappedFields": mapped},
            "metadata": {"source": PRODUCT, "tag": f"{run_id}-{n}"},
        }

    return body


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the trivial app exited early")
        try:
            address = (urlsplit(url).hostname, urlsplit(url).port)
            with socket.create_connection(address, 1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


async def sequential(base: str, body: Any, count: int) -> list[float]:
    connection = await HttpConnection.open(base)
    latencies = []
    try:
        for n in range(count):
            started = time.perf_counter()
            status, text = await connection.post("/v1/fetcher", body(n))
            if status != 202:
                raise RuntimeError(f"POST answered {status}: {text[:300]!r}")
            latencies.append(time.perf_counter() - started)
    finally:
        await connection.close()
    return latencies


def profile(pid: int, seconds: float, path: Path) -> subprocess.Popen[bytes] | None:
    """With ``--profile``: py-spy samples the api during the closed loop (collapsed stacks of
    the thread holding the GIL, written next to the run's logs)."""
    if not PROFILE:
        return None
    spy = Path(sys.executable).parent / "py-spy"
    out = path.with_suffix(".txt")
    print(f"profiling the api into {out}", file=sys.stderr)
    return subprocess.Popen(
        [
            str(spy),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
            "--gil",  # only the thread holding the GIL: where the process's Python CPU goes
        ],
        stdout=subprocess.DEVNULL,
    )


def trivial_round(clients: int, seconds: float) -> LoadResult:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", TRIVIAL_APP, str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, proc)
        body = job_body("t", "trivial")
        asyncio.run(sequential(base, body, 50))  # warm-up
        return asyncio.run(closed_loop(base, "/v1/fetcher", body, clients=clients, seconds=seconds))
    finally:
        proc.terminate()
        proc.wait(10)


async def register(base: str) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        await register_connection(client)


def service_round(
    run: Run, number: int, clients: int, seconds: float, rate: float
) -> tuple[LoadResult, LoadResult | None, list[float]]:
    store_db = f"fetcher_bench_store_{run.id}_{number}"
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))
    asyncio.run(_admin(f'CREATE DATABASE "{store_db}"'))
    logs = run.logs / f"round-{number}"
    logs.mkdir()
    service = Service(run.service_env(store_db), logs)
    try:
        # The broker as an operator provisions it: the api declares nothing by default and
        # its probe of the topology keeps it unready without it.
        provision_broker(service.env)
        service._spawn("api")
        service._wait_ready(("api",))
        asyncio.run(register(service.api))
        body = job_body(table_name(ROWS), f"{run.id}-{number}")
        alone = asyncio.run(sequential(service.api, lambda n: body(10**9 + n), 60))[10:]
        api_pid = service.procs["api"].pid
        profiler = profile(api_pid, seconds, run.logs / f"api-{number}")
        cpu_before = cpu_seconds(api_pid)
        result = asyncio.run(
            closed_loop(service.api, "/v1/fetcher", body, clients=clients, seconds=seconds)
        )
        result.cpu_seconds = cpu_seconds(api_pid) - cpu_before
        if profiler is not None:
            profiler.wait(30)
        paced: LoadResult | None = None
        if result.rate > rate * 1.05:
            paced = asyncio.run(
                open_loop(
                    service.api,
                    "/v1/fetcher",
                    lambda n: body(2 * 10**9 + n),
                    rate=rate,
                    clients=clients,
                    seconds=seconds,
                )
            )
        return result, paced, alone
    except Exception:
        print(service.tail(), file=sys.stderr)
        raise
    finally:
        service.stop()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=float, default=500.0, help="the paced run's jobs/s")
    parser.add_argument("--at", help="measure the service as committed at this revision")
    parser.add_argument("--profile", action="store_true", help="py-spy the api (dev extra)")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile

    run = Run(args.at)
    asyncio.run(prepare(ROWS))
    loads = [load_average()]
    rounds: list[tuple[LoadResult, LoadResult, LoadResult | None, list[float]]] = []
    ok = False
    try:
        for number in range(1, args.rounds + 1):
            trivial = trivial_round(args.clients, args.seconds)
            print(f"round {number}: trivial {trivial.rate:.0f} req/s", file=sys.stderr, flush=True)
            service, paced, alone = service_round(
                run, number, args.clients, args.seconds, args.rate
            )
            print(f"round {number}: service {service.rate:.0f} jobs/s", file=sys.stderr, flush=True)
            rounds.append((trivial, service, paced, alone))
            loads.append(load_average())
        ok = True
    finally:
        asyncio.run(run.cleanup())
        if ok and not PROFILE:
            shutil.rmtree(run.logs, ignore_errors=True)
        else:
            print(f"logs kept in {run.logs}", file=sys.stderr)

    print(
        f"\nSubmission to one `fetcher api`: {args.clients} clients, {args.seconds:.0f} s per "
        f"measurement, distinct requests, {ROWS}-row source table; measured {run.measured}"
    )
    print("closed loop (each client sends again as soon as answered):")
    print(
        f"{'round':<7}{'trivial req/s':>14}{'p50':>10}{'p99':>10}"
        f"{'service jobs/s':>16}{'p50':>10}{'p99':>10}{'service/trivial':>17}"
    )
    for number, (trivial, service, _, _) in enumerate(rounds, 1):
        print(
            f"{number:<7}{trivial.rate:>14.0f}{ms(trivial.percentile(50)):>10}"
            f"{ms(trivial.percentile(99)):>10}{service.rate:>16.0f}"
            f"{ms(service.percentile(50)):>10}{ms(service.percentile(99)):>10}"
            f"{service.rate / trivial.rate:>17.2f}"
        )
    ratio = median([s.rate / t.rate for t, s, _, _ in rounds])
    print(f"median service / trivial: {ratio:.2f}")
    per_job = median([s.cpu_seconds / len(s.latencies) for _, s, _, _ in rounds])
    print(f"api process CPU per job in the closed loop: {ms(per_job)} (median of rounds)")
    print(
        f"paced at {args.rate:.0f} jobs/s over {args.clients} connections (latency from due time):"
    )
    for number, (_, _, paced, _) in enumerate(rounds, 1):
        if paced is None:
            print(f"  round {number}: not run, the closed loop stayed below {args.rate:.0f} jobs/s")
        else:
            print(
                f"  round {number}: {paced.rate:.0f} jobs/s, p50 {ms(paced.percentile(50))}, "
                f"p99 {ms(paced.percentile(99))}"
            )
    alone = [x for *_, each in rounds for x in each]
    print(f"one request alone: p50 {ms(percentile(alone, 50))}, p99 {ms(percentile(alone, 99))}")
    statuses: dict[int, int] = {}
    for _, service, paced, _ in rounds:
        for result in (service, paced):
            for status, count in (result.statuses if result else {}).items():
                statuses[status] = statuses.get(status, 0) + count
    print(f"service answers: {statuses} (each must be 202)")
    print("load: " + " → ".join(loads))
    if set(statuses) != {202}:
        sys.exit(1)


if __name__ == "__main__":
    main()
