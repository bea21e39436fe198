"""The event store's appends under concurrency: one transaction per append (the store's
same statements and table lock, without grouping) against the store's single writer, which
puts the appends waiting meanwhile into one transaction (group commit).

``--clients`` tasks (default 32) each append ``--appends`` times one job's ``Requested`` event
with its request slot (what a submission writes), on a fresh database. Interleaved rounds:

  each      every append its own transaction (the store's insert called directly: its
            behaviour without group commit)
  grouped   ``PostgresJobEventStore.append`` (group commit)

Printed: appends/s, transactions, appends per transaction, and the ratio grouped / each.

Usage: nice .venv/bin/python benchmarks/bench_append.py [--clients 32] [--appends 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_job import _admin, pg_url  # noqa: E402
from load import load_average  # noqa: E402

from adapters.common.postgres import PostgresAddress  # noqa: E402
from adapters.eventstore.store import event_store_for  # noqa: E402
from domain import dedup  # noqa: E402
from domain.job import request_job  # noqa: E402
from domain.request import ExtractionRequest  # noqa: E402
from domain.tenant import SINGLE_TENANT  # noqa: E402

REQUEST = ExtractionRequest.create({"db": {"t": ["id"]}}, None, {"source": "bench"})


def submission() -> list:
    """What one submission appends: the job's ``Requested`` and its request slot's taking."""
    now = datetime.now(UTC)
    requested = request_job(uuid.uuid4(), REQUEST, now, tenant=SINGLE_TENANT)
    slot = dedup.fold_slot(uuid.uuid4(), [])
    return [requested, dedup.take(slot, requested.originator_id, now)]


async def one_round(database: str, mode: str, clients: int, appends: int) -> tuple[float, int]:
    store = event_store_for(PostgresAddress.from_url(pg_url(database)))
    await store.open()
    transactions = 0
    insert = store._insert

    async def counted(events: list) -> object:
        nonlocal transactions
        transactions += 1
        return await insert(events)

    store._insert = counted  # type: ignore[method-assign]
    store._writer._insert = counted

    async def append(events: list) -> None:
        if mode == "grouped":
            await store.append(events)
        else:
            await store._insert(events)

    async def client() -> None:
        for _ in range(appends):
            await append(submission())

    try:
        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return time.perf_counter() - started, transactions
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    total = args.clients * args.appends
    loads = [load_average()]
    rates: dict[str, list[float]] = {"each": [], "grouped": []}
    per_tx: dict[str, list[float]] = {"each": [], "grouped": []}
    for number in range(1, args.rounds + 1):
        for mode in ("each", "grouped"):
            database = f"fetcher_bench_append_{uuid.uuid4().hex[:8]}"
            asyncio.run(_admin(f'CREATE DATABASE "{database}"'))
            try:
                seconds, transactions = asyncio.run(
                    one_round(database, mode, args.clients, args.appends)
                )
            finally:
                asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            rates[mode].append(total / seconds)
            per_tx[mode].append(total / transactions)
            print(
                f"round {number} {mode:<8} {total / seconds:7.0f} appends/s, "
                f"{transactions} transactions",
                file=sys.stderr,
                flush=True,
            )
        loads.append(load_average())
    print(
        f"\n{args.clients} concurrent clients, {args.appends} each, appends (Requested + slot), "
        f"PostgreSQL, {args.rounds} interleaved rounds (medians)"
    )
    for mode in ("each", "grouped"):
        print(
            f"  {mode:<8} {statistics.median(rates[mode]):7.0f} appends/s, "
            f"{statistics.median(per_tx[mode]):5.1f} appends per transaction"
        )
    ratios = [g / e for g, e in zip(rates["grouped"], rates["each"], strict=True)]
    print(f"  grouped / each: {statistics.median(ratios):.1f} times")
    print("load: " + " → ".join(loads))


if __name__ == "__main__":
    main()
