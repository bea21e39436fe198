"""Proof by tampering: records changed directly in SQLite and in PostgreSQL, then
``fetcher audit verify`` (the real entry point) names each break; an untouched store, and a
store written before chaining, verify clean."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from adapters.audit.checkpoints import SqlCheckpointStore
from adapters.common.postgres import PostgresAddress
from adapters.crypto.audit_signing import AuditKeys, encode_public
from adapters.crypto.keys import KeyRing
from adapters.eventstore.store import event_store_for
from adapters.storage.filesystem import FilesystemResultStorage
from application.audit.checkpointer import RecordCheckpoints
from application.audit.proof import ProveJob
from application.audit.verify_job import Verdict, VerifyJob
from application.audit.witness import WitnessCheckpoints
from application.jobs.repository import EventSourcedJobs
from domain import job as jobs
from domain.audit_chain import link, parse_state
from domain.tenant import SINGLE_TENANT
from tests.integration.conftest import fresh_pg_database
from tests.support.audit_trail import audit_request, audited_history, record_jobs
from tests.support.twins import MASTER_KEY, FakeClock

FETCHER = str(Path(sys.executable).parent / "fetcher")
KEYS = AuditKeys.from_ring(KeyRing(MASTER_KEY))


@dataclass
class Backend:
    """One event store database, reached by the service's settings and by raw SQL."""

    env: dict[str, str]
    database: PostgresAddress | Path
    execute: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
    param: str
    position: str
    """The column of the log position (rowid on SQLite)."""

    def job_key(self, job: UUID) -> object:
        return job.hex if isinstance(self.database, Path) else job

    def row(self, job: UUID, version: int) -> tuple[str, bytes]:
        p = self.param
        [(topic, state)] = self.execute(
            f"SELECT topic, state FROM stored_events WHERE originator_id = {p} "
            f"AND originator_version = {p}",
            (self.job_key(job), version),
        )
        return topic, bytes(state)

    def write(self, job: UUID, version: int, topic: str, state: bytes) -> None:
        p = self.param
        self.execute(
            f"UPDATE stored_events SET topic = {p}, state = {p} WHERE originator_id = {p} "
            f"AND originator_version = {p}",
            (topic, state, self.job_key(job), version),
        )


def _sqlite(path: Path) -> Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]:
    def execute(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as con:
            return con.execute(statement, params).fetchall()

    return execute


def _postgres(url: str) -> Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]:
    def execute(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as con:
            cur = con.execute(statement.encode(), params)
            return cur.fetchall() if cur.description else []

    return execute


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "fetcher.sqlite3"
        yield Backend({"FETCHER_DATA_DIR": str(tmp_path)}, path, _sqlite(path), "?", "rowid")
        return
    with fresh_pg_database("fetcher_audit_test") as url:
        yield Backend(
            {"FETCHER_DATABASE_URL": url},
            PostgresAddress.from_url(url),
            _postgres(url),
            "%s",
            "notification_id",
        )


async def _history(backend: Backend, **kwargs: int) -> list[UUID]:
    store = event_store_for(backend.database)
    checkpoints = SqlCheckpointStore.for_database(backend.database)
    try:
        await store.open()
        await checkpoints.create_schema()
        return await audited_history(store, checkpoints, KEYS, **kwargs)
    finally:
        await checkpoints.close()
        await store.close()


def _verify(backend: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FETCHER_", "APP_ENC_", "DATASOURCE_"))
    }
    env.update(backend.env, APP_ENC_KEY=MASTER_KEY)
    return subprocess.run(
        [FETCHER, "audit", *args], env=env, capture_output=True, text=True, timeout=60
    )


def _first_break(backend: Backend) -> str:
    result = _verify(backend, "verify")
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("FAIL"))
    return line.removeprefix("FAIL: first break: ")


async def test_an_untouched_store_verifies(backend: Backend) -> None:
    await _history(backend)
    result = _verify(backend, "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout and "job events: 18, jobs: 6" in result.stdout


async def test_an_altered_fact_is_named_changed(backend: Backend) -> None:
    ids = await _history(backend)
    topic, state = backend.row(ids[2], 2)
    backend.write(ids[2], 2, topic, state.replace(b'"w1"', b'"w9"'))
    assert _first_break(backend).startswith(f"changed: job {ids[2]}, version 2,")


async def test_a_deleted_event_is_named_missing(backend: Backend) -> None:
    ids = await _history(backend)
    backend.execute(
        f"DELETE FROM stored_events WHERE originator_id = {backend.param} "
        f"AND originator_version = 2",
        (backend.job_key(ids[1]),),
    )
    assert _first_break(backend).startswith(f"missing: job {ids[1]}, version 2,")


async def test_two_swapped_events_are_named_reordered(backend: Backend) -> None:
    ids = await _history(backend)
    second, third = backend.row(ids[3], 2), backend.row(ids[3], 3)
    backend.write(ids[3], 2, *third)
    backend.write(ids[3], 3, *second)
    assert _first_break(backend).startswith(f"reordered: job {ids[3]}, version 2,")


async def test_a_deleted_job_is_named_missing(backend: Backend) -> None:
    ids = await _history(backend)
    backend.execute(
        f"DELETE FROM stored_events WHERE originator_id = {backend.param}",
        (backend.job_key(ids[0]),),
    )
    assert _first_break(backend).startswith(f"missing: job {ids[0]}, version 1:")


async def test_a_truncated_tail_is_named_missing(backend: Backend) -> None:
    ids = await _history(backend)
    [(last,)] = backend.execute(f"SELECT max({backend.position}) FROM stored_events", ())
    backend.execute(
        f"DELETE FROM stored_events WHERE {backend.position} > {backend.param}", (last - 2,)
    )
    # The last two records were the last job's claim and failure.
    assert _first_break(backend).startswith(f"missing: job {ids[-1]}, version 2:")


async def test_a_replaced_checkpoint_signature_is_named(backend: Backend) -> None:
    await _history(backend)
    positions = [
        p
        for (p,) in backend.execute(
            "SELECT position FROM fetcher_audit_checkpoints ORDER BY position", ()
        )
    ]
    p = backend.param
    [(other,)] = backend.execute(
        f"SELECT signature FROM fetcher_audit_checkpoints WHERE position = {p}", (positions[0],)
    )
    backend.execute(
        f"UPDATE fetcher_audit_checkpoints SET signature = {p} WHERE position = {p}",
        (other, positions[1]),
    )
    assert _first_break(backend).startswith(f"bad signature: position {positions[1]}:")


async def test_a_store_written_before_chaining_verifies_as_unchained(backend: Backend) -> None:
    store = event_store_for(backend.database)
    try:
        ids = await record_jobs(store, FakeClock(), 2)
    finally:
        await store.close()
    # As the version before chaining wrote them: no digests, the older class versions.
    for job in ids:
        for version in (1, 2, 3):
            topic, raw = backend.row(job, version)
            state = json.loads(raw)
            del state["prev_digest"], state["digest"]
            state["class_version"] = 2 if version == 1 else 1
            if version > 1:
                del state["class_version"]
            backend.write(job, version, topic, json.dumps(state).encode())
    [(old_end,)] = backend.execute(f"SELECT max({backend.position}) FROM stored_events", ())
    await _history(backend)
    result = _verify(backend, "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"unchained before position {old_end + 1}: 6 job events" in result.stdout


async def test_an_exported_bundle_verifies_offline_and_its_tampering_shows(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await _history(backend)
    bundle = tmp_path / "bundle.jsonl"
    exported = _verify(backend, "export", "--out", str(bundle))
    assert exported.returncode == 0, exported.stderr
    public = KEYS.signer.public_key
    offline = ["verify", "--bundle", str(bundle), "--public-key", encode_public(public)]
    result = _verify(backend, *offline)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = bundle.read_text().splitlines()
    victim = next(i for i, x in enumerate(lines) if str(ids[4]) in x and '"version": 3' in x)
    lines[victim] = lines[victim].replace("boom 4", "fine")
    bundle.write_text("\n".join(lines) + "\n")
    result = _verify(backend, *offline)
    assert result.returncode == 1
    assert f"changed: job {ids[4]}, version 3" in result.stdout


async def test_a_process_that_did_not_read_the_job_links_to_its_stored_head(
    backend: Backend,
) -> None:
    """A store instance may append a job's next event without having read the job: the
    previous event's digest is then read from the database."""
    clock = FakeClock()
    requested = jobs.request_job(uuid4(), audit_request(), clock.now(), tenant=SINGLE_TENANT)
    first = event_store_for(backend.database)
    try:
        await first.append([requested])
    finally:
        await first.close()
    second = event_store_for(backend.database)
    try:
        job = jobs.apply(requested, None)
        await second.append([jobs.claim(job, "w1", clock.now(), timedelta(minutes=1))])
    finally:
        await second.close()
    _, one = backend.row(requested.originator_id, 1)
    _, two = backend.row(requested.originator_id, 2)
    assert parse_state(two)["prev_digest"] == parse_state(one)["digest"] != ""


async def test_a_rolled_back_tail_is_named_against_an_earlier_bundle(
    backend: Backend, tmp_path: Path
) -> None:
    """Deleting the newest records together with the checkpoints that cover them verifies
    clean on its own; against a bundle exported before, it is named."""
    ids = await _history(backend)
    old = tmp_path / "old.jsonl"
    assert _verify(backend, "export", "--out", str(old)).returncode == 0
    p = backend.param
    backend.execute(f"DELETE FROM stored_events WHERE {backend.position} > {p}", (10,))
    backend.execute(f"DELETE FROM fetcher_audit_checkpoints WHERE position > {p}", (10,))
    alone = _verify(backend, "verify")
    assert alone.returncode == 0, alone.stdout  # what the chain and checkpoints cannot see
    against = _verify(backend, "verify", "--against", str(old))
    assert against.returncode == 1, against.stdout + against.stderr
    line = next(x for x in against.stdout.splitlines() if x.startswith("FAIL"))
    # Position 11 was the third job's claim (six requests, then each job's claim and failure).
    assert line.startswith(f"FAIL: first break: missing: job {ids[2]}, version 2, position 11:")
    assert "records after position 10 were removed or rewritten" in line


async def test_a_store_that_grew_extends_its_earlier_bundle(
    backend: Backend, tmp_path: Path
) -> None:
    await _history(backend)
    old = tmp_path / "old.jsonl"
    assert _verify(backend, "export", "--out", str(old)).returncode == 0
    await _history(backend, jobs_count=2)
    result = _verify(backend, "verify", "--against", str(old))
    assert result.returncode == 0, result.stdout + result.stderr
    new = tmp_path / "new.jsonl"
    assert _verify(backend, "export", "--out", str(new)).returncode == 0
    public = encode_public(KEYS.signer.public_key)
    offline = ["verify", "--bundle", str(new), "--public-key", public, "--against", str(old)]
    result = _verify(backend, *offline)
    assert result.returncode == 0, result.stdout + result.stderr


async def test_a_record_an_earlier_bundle_holds_rewritten_is_named_first(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await _history(backend)
    old = tmp_path / "old.jsonl"
    assert _verify(backend, "export", "--out", str(old)).returncode == 0
    topic, state = backend.row(ids[1], 3)
    backend.write(ids[1], 3, topic, state.replace(b"boom 1", b"fine"))
    result = _verify(backend, "verify", "--against", str(old))
    assert result.returncode == 1
    line = next(x for x in result.stdout.splitlines() if x.startswith("FAIL"))
    assert line.startswith(f"FAIL: first break: changed: job {ids[1]}, version 3, position 10:")
    assert "what was exported was rewritten" in line


async def _witness(backend: Backend, folder: Path) -> int:
    """What the relay does after recording checkpoints: each one kept in object storage (a
    folder here, as ``fetcher serve`` keeps it)."""
    store = event_store_for(backend.database)
    checkpoints = SqlCheckpointStore.for_database(backend.database)
    try:
        await store.open()
        witness = WitnessCheckpoints(checkpoints, FilesystemResultStorage(folder), store)
        return await witness()
    finally:
        await checkpoints.close()
        await store.close()


async def test_a_rollback_of_witnessed_checkpoints_is_named(
    backend: Backend, tmp_path: Path
) -> None:
    await _history(backend)
    objects = tmp_path / "objects"
    assert await _witness(backend, objects) == 4  # positions 5, 10, 15 and 18
    assert await _witness(backend, objects) == 0  # each once
    witnesses = objects / "audit" / "checkpoints"
    assert sorted(p.name for p in witnesses.iterdir())[0] == f"{5:020d}.json"
    p = backend.param
    backend.execute(f"DELETE FROM stored_events WHERE {backend.position} > {p}", (10,))
    backend.execute(f"DELETE FROM fetcher_audit_checkpoints WHERE position > {p}", (10,))
    assert _verify(backend, "verify").returncode == 0
    result = _verify(backend, "verify", "--witness", str(witnesses))
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("FAIL"))
    assert line.startswith("FAIL: first break: missing: position 15: checkpoint 15 witnessed at ")
    assert line.endswith("is missing; records after position 10 were removed or rewritten")
    assert "witnesses: 4 checkpoints kept outside the database" in result.stdout


async def test_records_rewritten_under_re_signed_checkpoints_break_the_witnesses(
    backend: Backend, tmp_path: Path
) -> None:
    """Whoever holds the signing key can rewrite records and sign new checkpoints over them;
    the witnesses, written when the originals were recorded, still show it."""
    ids = await _history(backend)
    objects = tmp_path / "objects"
    await _witness(backend, objects)
    prev = ""
    for version in (1, 2, 3):  # the job rewritten, its chain recomputed
        topic, state = backend.row(ids[0], version)
        content = parse_state(state)
        del content["prev_digest"], content["digest"]
        if version == 1:
            content["request"]["metadata"]["source"] = "forged"
        relinked, prev = link(str(ids[0]), version, topic, json.dumps(content).encode(), prev)
        backend.write(ids[0], version, topic, relinked)
    backend.execute("DELETE FROM fetcher_audit_checkpoints", ())
    await _history(backend, jobs_count=0)  # the relay signs new checkpoints over it all
    assert _verify(backend, "verify").returncode == 0  # consistent, and freshly signed
    result = _verify(backend, "verify", "--witness", str(objects / "audit" / "checkpoints"))
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("FAIL"))
    assert "checkpoint 5 witnessed at" in line and "differs from the one stored there" in line


async def test_quiet_verify_prints_nothing_and_says_it_by_its_exit_status(
    backend: Backend,
) -> None:
    ids = await _history(backend)
    clean = _verify(backend, "verify", "--quiet")
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")
    topic, state = backend.row(ids[2], 2)
    backend.write(ids[2], 2, topic, state.replace(b'"w1"', b'"w9"'))
    broken = _verify(backend, "verify", "--quiet")
    assert (broken.returncode, broken.stdout, broken.stderr) == (1, "", "")


async def test_each_jobs_proof_finds_the_checkpoint_holding_its_last_event(
    backend: Backend,
) -> None:
    """On the real stores (PostgreSQL tells the last record's position, SQLite does not):
    every job of a history spread over several checkpoints proves intact; a job whose last
    event came after the newest checkpoint naming it is not yet held, then is; a tail removed
    from the database is not what the checkpoint holds."""
    await _history(backend)
    store = event_store_for(backend.database)
    checkpoints = SqlCheckpointStore.for_database(backend.database)
    try:
        await store.open()
        verify = VerifyJob(ProveJob(EventSourcedJobs(store), store, checkpoints), KEYS.keys)
        ids = [UUID(j) for c in await checkpoints.page(0, 100) for j in c.heads or {}]
        assert len(set(ids)) == 6
        for job_id in set(ids):
            proof = await verify(job_id, tenant=SINGLE_TENANT)
            assert proof.verdict is Verdict.INTACT, (job_id, proof.check.problems)

        clock = FakeClock()
        job_id = uuid4()
        await store.append(
            [jobs.request_job(job_id, audit_request(), clock.now(), tenant=SINGLE_TENANT)]
        )
        recorder = RecordCheckpoints(store, checkpoints, KEYS.signer, clock, every_records=1)
        await recorder()
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        await store.append([jobs.claim(job, "w1", clock.now(), timedelta(minutes=1))])
        assert (await verify(job_id, tenant=SINGLE_TENANT)).verdict is Verdict.UNSEALED
        await recorder()
        assert (await verify(job_id, tenant=SINGLE_TENANT)).verdict is Verdict.INTACT

        p = backend.param
        backend.execute(
            f"DELETE FROM stored_events WHERE originator_id = {p} AND originator_version = 2",
            (backend.job_key(job_id),),
        )
        truncated = await verify(job_id, tenant=SINGLE_TENANT)
        assert truncated.verdict is Verdict.BROKEN
        assert any(
            "(version 1) is not the one the checkpoint" in x for x in truncated.check.problems
        )
    finally:
        await checkpoints.close()
        await store.close()


async def test_checkpoints_recorded_before_the_job_list_are_listed_at_the_next_start(
    backend: Backend,
) -> None:
    """A store whose checkpoints predate the list of the jobs each names (or were recorded by
    an older process meanwhile) has them listed when the schema is next created."""
    await _history(backend)
    backend.execute("DELETE FROM fetcher_audit_checkpoint_jobs", ())
    checkpoints = SqlCheckpointStore.for_database(backend.database)
    try:
        stored = [c for c in await checkpoints.page(0, 100) if c.heads]
        job = UUID(next(iter(stored[0].heads or {})))
        assert await checkpoints.holding(job) is None
        await checkpoints.create_schema()
        named = {UUID(j) for c in stored for j in c.heads or {}}
        for job_id in named:
            newest = max(c.position for c in stored if str(job_id) in (c.heads or {}))
            found = await checkpoints.holding(job_id)
            assert found is not None and found.position == newest
        assert await checkpoints.holding(uuid4()) is None
        await checkpoints.create_schema()  # nothing more to list, nothing listed twice
        [(rows,)] = backend.execute("SELECT count(*) FROM fetcher_audit_checkpoint_jobs", ())
        assert rows == sum(len(c.heads or {}) for c in stored)
    finally:
        await checkpoints.close()
