"""Read+encode throughput of ``PostgresReader`` (prepare, then stream) against a plain asyncpg
cursor baseline.

Creates (once) a table of the shape in ``/work/shared/notes/performance.md`` (bigint, text email,
numeric(18,2), timestamptz, boolean, text NULL 30 %, uuid) in a local test database, then runs
each variant in its own subprocess, interleaved over several rounds, and prints the median time,
rows/s, the ratio to the baseline measured in the same round, and peak RSS above an idle
interpreter with the same imports.

Variants:
  baseline        asyncpg server-side cursor, ``fetch(10000)`` chunks of ``SELECT *``, rows
                  counted and dropped (GC on)
  baseline_gc_paused  the same with the cyclic GC paused
  extract         ``PostgresReader.prepare`` + ``stream`` (struct per table, GC paused),
                  bytes counted
  dict_gc_paused  same cursor loop, ``dict(zip(...))`` per row + msgspec, GC paused
  struct_gc_on    same cursor loop, struct per table + msgspec, GC left on

Usage: .venv/bin/python benchmarks/bench_pg_encode.py [--rows 1000000] [--rounds 3]
           [--variants baseline,extract] [--limit N]
``--limit N`` reads only the first N rows (``id <= N``, a filter for ``extract``) of the same
table, to compare peak memory at different row counts.
Environment: FETCHER_BENCH_PG (default ``postgresql://postgres@127.0.0.1:5432``; trust auth).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from itertools import starmap
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import msgspec

from adapters.datasources.postgres.reader import PostgresReader
from domain.connection import DatabaseType, Endpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from source_table import ensure_source_table

DATABASE = "fetcher_ds_test"
TABLE = "bench_rows"
CHUNK = 10_000
VARIANTS = ("baseline", "baseline_gc_paused", "extract", "dict_gc_paused", "struct_gc_on")

_server = urlsplit(os.environ.get("FETCHER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432"))
HOST, PORT, USER = _server.hostname or "127.0.0.1", _server.port or 5432, _server.username


def endpoint() -> Endpoint:
    return Endpoint(
        type=DatabaseType.POSTGRESQL,
        host=HOST,
        port=PORT,
        database_name=DATABASE,
        user_name=USER or "postgres",
        password="",
    )


async def prepare(rows: int) -> None:
    admin = await asyncpg.connect(host=HOST, port=PORT, user=USER, database="postgres", ssl=False)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
            await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(host=HOST, port=PORT, user=USER, database=DATABASE, ssl=False)
    try:
        await ensure_source_table(conn, TABLE, rows)
    finally:
        await conn.close()


LIMIT = int(os.environ.get("FETCHER_BENCH_LIMIT", "0"))


async def table_read():  # type: ignore[no-untyped-def]
    from domain.schema import TableRead

    schema = await PostgresReader().discover(endpoint(), [])
    table = schema.tables[TABLE]
    filters = {"id": {"lte": (LIMIT,)}} if LIMIT else {}
    return TableRead(result_key=TABLE, table=table, columns=table.columns, filters=filters)


async def run_baseline(pause: bool) -> tuple[int, int]:
    conn = await asyncpg.connect(host=HOST, port=PORT, user=USER, database=DATABASE, ssl=False)
    rows = 0
    try:
        async with conn.transaction(readonly=True):
            where = f" WHERE id <= {LIMIT}" if LIMIT else ""
            cursor = await conn.cursor(f"SELECT * FROM {TABLE}{where}")
            while True:
                if pause:
                    gc.disable()
                batch = await cursor.fetch(CHUNK)
                if pause:
                    gc.enable()
                rows += len(batch)
                if len(batch) < CHUNK:
                    break
    finally:
        await conn.close()
    return rows, 0


async def run_extract() -> tuple[int, int]:
    read = await table_read()
    rows = size = 0
    reader, target = PostgresReader(chunk_rows=CHUNK), endpoint()
    async for chunk in reader.stream(target, reader.prepare(target, [read])):
        rows += chunk.rows
        size += len(chunk.data) + 1
    return rows, size


async def run_loop(kind: str) -> tuple[int, int]:
    read = await table_read()
    reader = PostgresReader(chunk_rows=CHUNK)
    statement = reader.statement(endpoint(), read)
    assert statement is not None
    names = sorted(c.name for c in read.columns)
    encode = msgspec.json.Encoder().encode
    conn = await asyncpg.connect(host=HOST, port=PORT, user=USER, database=DATABASE, ssl=False)
    rows = size = 0
    pause = kind != "struct_gc_on"
    try:
        async with conn.transaction(readonly=True):
            cursor = await conn.cursor(statement.sql, *statement.params)
            while True:
                if pause:
                    gc.disable()
                batch = await cursor.fetch(CHUNK)
                if kind == "dict_gc_paused":
                    data = encode([dict(zip(names, r, strict=True)) for r in batch])[1:-1]
                else:
                    data = encode(list(starmap(statement.row, batch)))[1:-1]
                if pause:
                    gc.enable()
                rows += len(batch)
                size += len(data) + 1
                if len(batch) < CHUNK:
                    break
    finally:
        await conn.close()
    return rows, size


def child(variant: str) -> None:
    idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if variant.startswith("baseline"):
        rows, size = asyncio.run(run_baseline(pause=variant == "baseline_gc_paused"))
    elif variant == "extract":
        rows, size = asyncio.run(run_extract())
    else:
        rows, size = asyncio.run(run_loop(variant))
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {"seconds": elapsed, "rows": rows, "bytes": size, "idle_kib": idle, "peak_kib": peak}
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--child", choices=VARIANTS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    asyncio.run(prepare(args.rows))
    variants = args.variants.split(",")
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    ratios: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        this_round = {}
        for variant in variants:
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant],
                env={**os.environ, "FETCHER_BENCH_LIMIT": str(args.limit)},
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            this_round[variant] = json.loads(out.strip().splitlines()[-1])
            results[variant].append(this_round[variant])
        if "baseline" in this_round:
            base = this_round["baseline"]["seconds"]
            for variant in variants:
                ratios[variant].append(this_round[variant]["seconds"] / base)
    print(
        f"{'variant':<16}{'median s':>10}{'rows/s':>12}{'x baseline':>12}{'MiB out':>10}"
        f"{'peak RSS MiB':>14}{'above idle':>12}"
    )
    for variant in variants:
        runs = results[variant]
        seconds = statistics.median(r["seconds"] for r in runs)
        rows = runs[0]["rows"]
        peak = max(r["peak_kib"] for r in runs) / 1024
        above = max(r["peak_kib"] - r["idle_kib"] for r in runs) / 1024
        ratio = statistics.median(ratios[variant]) if ratios[variant] else float("nan")
        print(
            f"{variant:<16}{seconds:>10.2f}{rows / seconds:>12,.0f}{ratio:>12.2f}"
            f"{runs[0]['bytes'] / 2**20:>10.1f}{peak:>14.1f}{above:>12.1f}"
        )


if __name__ == "__main__":
    main()
