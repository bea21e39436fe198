"""Cost of the audit trail: submission throughput with and without chaining + checkpoints,
and the time ``fetcher audit verify`` takes over a large log.

``throughput``: each round runs, interleaved, in its own process on a fresh PostgreSQL
event-store database:

  plain      the submission path's store work, as ``RequestJob`` does it (read the request
             slot, then append JobRequested + RequestSlotTaken in one transaction) from
             ``--concurrency`` tasks, with chaining switched off and no checkpoint recorder
  chained    the same with chaining on (no checkpoint recorder)
  audited    the same with chaining on and the checkpoint recorder running in the same process
             (every 1000 records, polling every second, as the relay does; in production it runs
             in the relay process, so this is the worse case)

Prints submissions per second and CPU time per submission for each, and the medians of the
per-round ratios against plain. On a shared machine the throughput swings with the other
load; CPU per submission is the steadier figure.

``verify``: writes ``--events`` chained job events (3 per job) through the real store in
batches, records the checkpoints (every 1000 records), then times ``verify_store`` over the
whole log (the same code ``fetcher audit verify`` runs) and the export + offline verification
of a bundle of the whole log. Before that, the proof of the oldest job: finding the
checkpoint that holds it through the list of jobs per checkpoint, against reading every
checkpoint (the baseline, in the same run), and the whole proof as the console's Verify runs
it.

Usage: .venv/bin/python benchmarks/bench_audit.py throughput [--rounds 5] [--jobs 3000]
       .venv/bin/python benchmarks/bench_audit.py verify [--events 1000000]
Environment: FETCHER_BENCH_PG (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG = os.environ.get("FETCHER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432").rstrip("/")


class _Clock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def _database(prefix: str) -> str:
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _open(name: str):  # type: ignore[no-untyped-def]
    from adapters.audit.checkpoints import SqlCheckpointStore
    from adapters.common.postgres import PostgresAddress
    from adapters.eventstore.store import event_store_for

    address = PostgresAddress.from_url(f"{PG}/{name}")
    return (
        event_store_for(address),
        SqlCheckpointStore.for_database(address),
    )


def _keys():  # type: ignore[no-untyped-def]
    from adapters.crypto.audit_signing import AuditKeys
    from adapters.crypto.keys import KeyRing, generate_master_key

    return AuditKeys.from_ring(KeyRing(generate_master_key()))


_MEASURE = (
    "import os, resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _run_measured(command: list[str]) -> tuple[int, float, float]:
    """Runs ``command`` from a small wrapper process (a child forked from this large process
    would count this process's pages in its peak); its exit status, CPU seconds and peak
    memory in MiB."""
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=False
    )
    peak_kib = int(result.stderr.strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return result.returncode, usage.ru_utime + usage.ru_stime, peak_kib / 1024


# --- throughput ---------------------------------------------------------------------------------


async def _submit_all(mode: str, jobs: int, concurrency: int) -> tuple[float, float]:
    from adapters.eventstore import chaining
    from application.audit.checkpointer import RecordCheckpoints
    from application.policies.follower import PeriodicTask
    from domain import dedup
    from domain.job import request_job
    from domain.request import ExtractionRequest
    from domain.tenant import SINGLE_TENANT

    if mode == "plain":
        chaining.Chainer.link = lambda self, events, previous: (list(events), {})  # type: ignore[method-assign,assignment]
    name = _database("fetcher_bench_audit")
    store, checkpoints = _open(name)
    stop = asyncio.Event()
    loop_task = None
    try:
        await store.open()
        await checkpoints.create_schema()
        if mode == "audited":  # "chained": chaining on, no checkpoint recorder
            recorder = RecordCheckpoints(store, checkpoints, _keys().signer, _Clock())
            loop_task = asyncio.create_task(
                PeriodicTask(name="audit", poll_interval=1.0, action=recorder).run(stop)
            )
        clock = _Clock()
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(jobs):
            queue.put_nowait(i)

        async def submitter() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                request = ExtractionRequest.create(
                    {"pg": {"orders": ["id", "total"]}}, None, {"source": "bench", "n": str(i)}
                )
                slot_id = dedup.slot_id(request.request_hash, SINGLE_TENANT)
                slot = dedup.fold_slot(slot_id, await store.slot_events(slot_id))
                requested = request_job(uuid.uuid4(), request, clock.now(), tenant=SINGLE_TENANT)
                await store.append(
                    [requested, dedup.take(slot, requested.originator_id, clock.now())]
                )

        # Warm-up: connections and code paths.
        warm = ExtractionRequest.create({"pg": {"w": ["id"]}}, None, {"source": "warm"})
        await store.append([request_job(uuid.uuid4(), warm, clock.now(), tenant=SINGLE_TENANT)])
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(submitter() for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        if loop_task is not None:
            # The recorder keeps up: everything submitted gets covered within a poll or two.
            await asyncio.sleep(2.5)
            latest = await checkpoints.latest()
            assert latest is not None and latest.position > 0
        return jobs / elapsed, cpu / jobs
    finally:
        stop.set()
        if loop_task is not None:
            await loop_task
        await checkpoints.close()
        await store.close()
        _drop(name)


def _child(args: argparse.Namespace) -> None:
    rate, cpu = asyncio.run(_submit_all(args.mode, args.jobs, args.concurrency))
    print(json.dumps({"rate": rate, "cpu": cpu}))


MODES = ("plain", "chained", "audited")


def _run_child(mode: str, jobs: int, concurrency: int) -> dict[str, float]:
    """One measurement in its own process; tried again (up to 3 times) when the shared
    PostgreSQL refuses a connection."""
    for attempt in range(3):
        out = subprocess.run(
            [sys.executable, __file__, "_child", mode, str(jobs), str(concurrency)],
            capture_output=True,
            text=True,
        )
        if out.returncode == 0:
            result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
            return result
        print(f"  {mode} failed (attempt {attempt + 1}): {out.stderr.strip()[-200:]}", flush=True)
        time.sleep(5)
    raise SystemExit(f"{mode} failed three times")


def _throughput(args: argparse.Namespace) -> None:
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    cpus: dict[str, list[float]] = {m: [] for m in MODES}
    ratios: dict[str, list[float]] = {m: [] for m in MODES[1:]}
    cpu_ratios: dict[str, list[float]] = {m: [] for m in MODES[1:]}
    for r in range(args.rounds):
        order = MODES if r % 2 == 0 else tuple(reversed(MODES))
        got, cpu = {}, {}
        for mode in order:
            result = _run_child(mode, args.jobs, args.concurrency)
            got[mode], cpu[mode] = result["rate"], result["cpu"]
            rates[mode].append(got[mode])
            cpus[mode].append(cpu[mode])
        for mode in MODES[1:]:
            ratios[mode].append(got[mode] / got["plain"])
            cpu_ratios[mode].append(cpu[mode] / cpu["plain"])
        print(
            f"round {r + 1}: "
            + ", ".join(f"{m} {got[m]:.0f}/s ({1e6 * cpu[m]:.0f} us CPU/job)" for m in MODES),
            flush=True,
        )
    print("medians of the per-round ratios against plain (throughput; CPU per submission):")
    for mode in MODES[1:]:
        print(
            f"  {mode}: throughput {statistics.median(ratios[mode]):.3f} "
            f"(median {statistics.median(rates[mode]):.0f}/s against "
            f"{statistics.median(rates['plain']):.0f}/s), "
            f"CPU per submission {statistics.median(cpu_ratios[mode]):.3f}"
        )


# --- verify -------------------------------------------------------------------------------------


async def _verify(args: argparse.Namespace) -> None:
    from adapters.crypto.audit_signing import encode_public
    from application.audit.bundle import export_lines, read_bundle, verify_bundle, verify_store
    from application.audit.checkpointer import RecordCheckpoints
    from domain import job as jobs
    from domain.request import ExtractionRequest
    from domain.tenant import SINGLE_TENANT

    name = _database("fetcher_bench_verify")
    store, checkpoints = _open(name)
    keys = _keys()
    try:
        await store.open()
        await checkpoints.create_schema()
        request = ExtractionRequest.create({"pg": {"orders": ["id"]}}, None, {"source": "b"})
        now = datetime.now(UTC)
        per_batch = 1000  # jobs per append: 3000 events
        started = time.perf_counter()
        written = 0
        oldest: uuid.UUID | None = None
        while written < args.events:
            batch = []
            for _ in range(per_batch):
                requested = jobs.request_job(uuid.uuid4(), request, now, tenant=SINGLE_TENANT)
                oldest = oldest or requested.originator_id
                job = jobs.apply(requested, None)
                claimed = jobs.claim(job, "w1", now, timedelta(minutes=1))
                job = jobs.apply(claimed, job)
                batch += [requested, claimed, jobs.fail(job, "boom", now, "w1")]
            await store.append(batch)
            written += len(batch)
        print(
            f"wrote {written} chained events in {time.perf_counter() - started:.1f} s", flush=True
        )
        started = time.perf_counter()
        recorder = RecordCheckpoints(
            store, checkpoints, keys.signer, _Clock(), every_records=1000, every_seconds=0
        )
        made = await recorder()
        print(
            f"recorded {made} checkpoints in {time.perf_counter() - started:.1f} s "
            "(the relay's checkpoint work for this log)",
            flush=True,
        )
        assert oldest is not None
        await _prove(store, checkpoints, keys, oldest)
        started, cpu = time.perf_counter(), time.process_time()
        report = await verify_store(store, checkpoints, keys.keys)
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert report.ok, report.summary()
        print(
            f"verify_store: {report.records} records, {report.checkpoints} checkpoints "
            f"in {took:.1f} s ({cpu:.1f} s CPU)",
            flush=True,
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bundle.jsonl"
            started = time.perf_counter()
            with path.open("w") as out:
                async for line in export_lines(store, checkpoints, None, None, "now"):
                    out.write(line + "\n")
            exported = time.perf_counter() - started
            size = path.stat().st_size / 2**20
            print(f"export: {exported:.1f} s ({size:.0f} MiB)", flush=True)
            # What an auditor runs: the CLI on the file, in a process of its own (its peak
            # memory is its own).
            public = encode_public(keys.signer.public_key)
            command = [
                str(Path(sys.executable).with_name("fetcher")), "audit", "verify",
                "--bundle", str(path), "--public-key", public, "--quiet",
            ]  # fmt: skip
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            status, cpu_total, peak = await asyncio.to_thread(_run_measured, command)
            took = time.perf_counter() - started
            assert status == 0, "the bundle does not verify"
            cpu = cpu_total - (before.ru_utime + before.ru_stime)
            print(
                f"offline verify of the bundle (fetcher audit verify --bundle): {took:.1f} s "
                f"({cpu:.1f} s CPU), peak memory {peak:.0f} MiB",
                flush=True,
            )
            started, cpu = time.perf_counter(), time.process_time()
            with path.open() as f:
                offline = verify_bundle(read_bundle(f), keys.keys)
            took, cpu = time.perf_counter() - started, time.process_time() - cpu
            assert offline.ok, offline.summary()
            print(
                f"the same, read whole into memory (verify_bundle): {took:.1f} s ({cpu:.1f} s CPU)",
                flush=True,
            )
    finally:
        await checkpoints.close()
        await store.close()
        _drop(name)


async def _prove(store, checkpoints, keys, job_id: uuid.UUID) -> None:  # type: ignore[no-untyped-def]
    """A tenant auditor's proof of the log's oldest job (the most checkpoints after it): the
    checkpoint holding it found through the list of jobs per checkpoint, against the
    baseline of reading every checkpoint after it (what the proof did before the list)."""
    from application.audit.proof import ProveJob
    from application.audit.verify_job import Verdict, VerifyJob
    from application.jobs.repository import EventSourcedJobs
    from domain.tenant import SINGLE_TENANT

    rounds = 5
    started = time.perf_counter()
    for _ in range(rounds):
        found = await checkpoints.holding(job_id)
    indexed = (time.perf_counter() - started) / rounds
    started, after, scanned = time.perf_counter(), 0, None
    while page := await checkpoints.page(after, 100):
        scanned = next((c for c in reversed(page) if str(job_id) in (c.heads or {})), scanned)
        after = page[-1].position
    scan = time.perf_counter() - started
    assert found is not None and scanned is not None and found.position == scanned.position
    print(
        f"checkpoint holding the oldest job: {indexed * 1000:.1f} ms listed, "
        f"{scan * 1000:.0f} ms reading every checkpoint ({scan / indexed:.0f}x)",
        flush=True,
    )
    verify = VerifyJob(ProveJob(EventSourcedJobs(store), store, checkpoints), keys.keys)
    started = time.perf_counter()
    verdict = await verify(job_id, tenant=SINGLE_TENANT)
    took = time.perf_counter() - started
    assert verdict.verdict is Verdict.INTACT, verdict.check.problems
    print(f"its whole proof, built and checked (the console's Verify): {took * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--rounds", type=int, default=5)
    t.add_argument("--jobs", type=int, default=3000)
    t.add_argument("--concurrency", type=int, default=16)
    v = sub.add_parser("verify")
    v.add_argument("--events", type=int, default=1_000_000)
    c = sub.add_parser("_child")
    c.add_argument("mode", choices=MODES)
    c.add_argument("jobs", type=int)
    c.add_argument("concurrency", type=int)
    args = parser.parse_args()
    if args.command == "throughput":
        _throughput(args)
    elif args.command == "verify":
        asyncio.run(_verify(args))
    else:
        _child(args)


if __name__ == "__main__":
    main()
