"""Latency of one small job on an idle service: from its ``POST`` to its ``job.completed``
event on a queue bound to the events exchange.

``fetcher api``, ``fetcher worker`` and ``fetcher relay`` run as separate processes on a fresh
event-store database (PostgreSQL), RabbitMQ and nanio, as in ``bench_job.py``. After a few
warm-up jobs, ``--jobs`` jobs (default 100) over a 10-row table are submitted one at a time,
each as soon as the event of the one before arrived; every request is distinct. Printed: p50,
p90, p99 and max, and where the time went, from each job's own event timestamps:

  accept    POST → ``Requested`` recorded
  dispatch  ``Requested`` → ``Claimed`` (relay publishes the work order, worker claims it)
  run       ``Claimed`` → ``Completed`` (read 10 rows, seal, upload, record)
  emit      ``Completed`` → the event is received (relay publishes it)

The baseline, in the same run: the broker's own round trip (publish to the exchange → received
on the bound queue), the floor under any event-driven path. The load (``os.getloadavg``) is
printed, since the machine may be shared.

Usage: nice .venv/bin/python benchmarks/bench_latency.py [--jobs 100] [--at REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_job import RABBIT, Run, Service, _admin, prepare, table_name
from bench_submit import job_body, register
from load import load_average, ms, percentile

ROWS = 10
WARM_UP = 5


async def _broker_round_trips(exchange_name: str, count: int) -> list[float]:
    import aio_pika

    connection = await aio_pika.connect(RABBIT)
    async with connection:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(
            exchange_name, aio_pika.ExchangeType.TOPIC, auto_delete=True
        )
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(exchange, routing_key="probe.*")
        received: asyncio.Queue[float] = asyncio.Queue()

        async def on_message(message: Any) -> None:
            async with message.process():
                received.put_nowait(time.perf_counter())

        await queue.consume(on_message)
        out = []
        for n in range(count):
            started = time.perf_counter()
            await exchange.publish(aio_pika.Message(body=str(n).encode()), routing_key="probe.x")
            out.append(await asyncio.wait_for(received.get(), 10) - started)
        return out


async def _jobs(run: Run, service: Service, count: int) -> list[dict[str, float]]:
    import aio_pika
    import httpx

    await register(service.api)
    body = job_body(table_name(ROWS), run.id)
    connection = await aio_pika.connect(RABBIT)
    async with connection, httpx.AsyncClient(base_url=service.api, timeout=60) as client:
        channel = await connection.channel()
        exchange = await channel.get_exchange(run.events_exchange)
        queue = await channel.declare_queue(exclusive=True)
        await queue.bind(exchange, routing_key="job.*")
        events: asyncio.Queue[tuple[float, float, Any]] = asyncio.Queue()

        async def on_message(message: Any) -> None:
            async with message.process():
                events.put_nowait((time.perf_counter(), time.time(), message))

        await queue.consume(on_message)
        timings: list[dict[str, float]] = []
        for n in range(WARM_UP + count):
            posted_wall, started = time.time(), time.perf_counter()
            response = await client.post("/v1/fetcher", json=body(n))
            if response.status_code != 202:
                raise RuntimeError(f"job not accepted: {response.status_code} {response.text}")
            job_id = response.json()["jobId"]
            while True:
                arrived, arrived_wall, message = await asyncio.wait_for(events.get(), 30)
                if json.loads(message.body).get("jobId") == job_id:
                    break
            if message.routing_key != "job.completed":
                raise RuntimeError(f"job {job_id} ended {message.routing_key}")
            if n >= WARM_UP:
                timings.append(
                    {
                        "job": job_id,
                        "total": arrived - started,
                        "posted": posted_wall,
                        "received": arrived_wall,
                    }
                )
        for timing in timings:
            history = (await client.get(f"/v1/fetcher/{timing['job']}/events")).json()["events"]
            stamps = {
                e["type"]: datetime.fromisoformat(e["timestamp"]).timestamp() for e in history
            }
            timing.update(
                accept=stamps["Requested"] - timing["posted"],
                dispatch=stamps["Claimed"] - stamps["Requested"],
                run=stamps["Completed"] - stamps["Claimed"],
                emit=timing["received"] - stamps["Completed"],
            )
        return timings


def measure(run: Run, count: int) -> list[dict[str, float]]:
    store_db = f"fetcher_bench_store_{run.id}_latency"
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))
    asyncio.run(_admin(f'CREATE DATABASE "{store_db}"'))
    logs = run.logs / "latency"
    logs.mkdir()
    service = Service(run.service_env(store_db), logs)
    try:
        service.start()
        time.sleep(1.0)  # idle: start-up work settles
        return asyncio.run(_jobs(run, service, count))
    except Exception:
        print(service.tail(), file=sys.stderr)
        raise
    finally:
        service.stop()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{store_db}" WITH (FORCE)'))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--at", help="measure the service as committed at this revision")
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    args = parser.parse_args()

    run = Run(args.at)
    asyncio.run(prepare(ROWS))
    loads = [load_average()]
    ok = False
    try:
        floor = asyncio.run(_broker_round_trips(f"fetcher.bench.{run.id}.probe", args.jobs))
        timings = measure(run, args.jobs)
        loads.append(load_average())
        ok = True
    finally:
        asyncio.run(run.cleanup())
        if ok and not args.keep_logs:
            shutil.rmtree(run.logs, ignore_errors=True)
        else:
            print(f"logs kept in {run.logs}", file=sys.stderr)

    totals = [t["total"] for t in timings]
    print(
        f"\nOne small job at a time on an idle service (api, worker, relay; {ROWS}-row table), "
        f"POST → job.completed received; {len(timings)} jobs; measured {run.measured}"
    )
    print(f"{'':<22}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}")

    def row(label: str, values: list[float]) -> None:
        print(
            f"{label:<22}{ms(percentile(values, 50)):>10}{ms(percentile(values, 90)):>10}"
            f"{ms(percentile(values, 99)):>10}{ms(max(values)):>10}"
        )

    row("POST → event", totals)
    for part in ("accept", "dispatch", "run", "emit"):
        row(f"  {part}", [t[part] for t in timings])
    row("broker round trip", floor)
    ratio = statistics.median(totals) / statistics.median(floor)
    print(f"p50 POST → event / p50 broker round trip: {ratio:.1f}")
    print("load: " + " → ".join(loads))


if __name__ == "__main__":
    main()
