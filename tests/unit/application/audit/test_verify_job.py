"""One job's proof (the console's "verify"): its chain, and the signed checkpoint holding its
last event; each way it can break is named."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from adapters.audit.checkpoints import InMemoryCheckpointStore
from adapters.crypto.audit_signing import AuditKeys
from adapters.crypto.keys import KeyRing, generate_master_key
from adapters.eventstore.store import EventsourcingJobEventStore
from adapters.memory.result_storage import InMemoryResultStorage
from application.audit.checkpointer import RecordCheckpoints
from application.audit.proof import FORMAT, ProofError, ProveJob, check_proof
from application.audit.verify_job import Verdict, VerifyJob
from application.audit.witness import WitnessCheckpoints
from application.jobs.repository import EventSourcedJobs
from application.ports.audit import SignatureCheck
from domain import job as jobs
from domain.audit_chain import Record
from domain.errors import FetcherError
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT, Tenant
from tests.support.twins import FakeClock

KEYS = AuditKeys.from_ring(KeyRing(generate_master_key()))
OTHER_KEYS = AuditKeys.from_ring(KeyRing(generate_master_key()))


@dataclasses.dataclass
class World:
    store: EventsourcingJobEventStore
    checkpoints: InMemoryCheckpointStore
    recorder: RecordCheckpoints
    clock: FakeClock

    async def ended_job(self) -> UUID:
        job_id = await self.claimed_job()
        await self.fail(job_id)
        return job_id

    async def claimed_job(self) -> UUID:
        job_id = uuid4()
        request = ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "p"})
        await self.store.append(
            [jobs.request_job(job_id, request, self.clock.now(), tenant=SINGLE_TENANT)]
        )
        job = jobs.fold(await self.store.job_events(job_id))
        assert job is not None
        await self.store.append([jobs.claim(job, "w1", self.clock.now(), timedelta(minutes=1))])
        return job_id

    async def fail(self, job_id: UUID) -> None:
        job = jobs.fold(await self.store.job_events(job_id))
        assert job is not None
        await self.store.append([jobs.fail(job, "boom", self.clock.now(), "w1")])

    def verifier(self, log: object = None, keys: AuditKeys = KEYS) -> VerifyJob:
        prove = ProveJob(
            EventSourcedJobs(self.store),
            log or self.store,  # type: ignore[arg-type]
            self.checkpoints,
        )
        return VerifyJob(prove, keys.keys)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = EventsourcingJobEventStore.in_memory()
    clock = FakeClock()
    checkpoints = InMemoryCheckpointStore()
    recorder = RecordCheckpoints(store, checkpoints, KEYS.signer, clock, every_records=1)
    yield World(store, checkpoints, recorder, clock)
    await store.close()


class Tampered:
    """The store's records of one job, one of them replaced."""

    def __init__(self, store: EventsourcingJobEventStore, change: dict[int, Record | None]):
        self.store, self.change = store, change

    async def job_records(self, job_id: UUID) -> list[Record]:
        records = await self.store.job_records(job_id)
        changed = [self.change.get(r.version, r) for r in records]
        return [r for r in changed if r is not None]


async def test_an_untouched_checkpointed_job_is_intact(world: World) -> None:
    job = await world.ended_job()
    unsealed = await world.verifier()(job, tenant=SINGLE_TENANT)
    assert unsealed.verdict is Verdict.UNSEALED and unsealed.check.checkpoint is None
    await world.recorder()
    proof = await world.verifier()(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.INTACT, proof.check.problems
    assert proof.check.signature is SignatureCheck.VALID
    assert proof.check.checkpoint is not None and proof.check.checkpoint.heads is None
    assert any("head (version 3)" in item for item in proof.check.checked)


async def test_a_job_that_went_on_after_its_checkpoint_waits_for_the_next(world: World) -> None:
    """Claimed before a checkpoint and ended after it: its last event is not held yet, which
    is not a break; the next checkpoint holds it."""
    job = await world.claimed_job()
    await world.recorder()
    await world.fail(job)
    waiting = await world.verifier()(job, tenant=SINGLE_TENANT)
    assert waiting.verdict is Verdict.UNSEALED, waiting.check.problems
    assert waiting.check.chain_intact
    await world.recorder()
    proof = await world.verifier()(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.INTACT, proof.check.problems
    assert any("head (version 3)" in item for item in proof.check.checked)


async def test_a_changed_fact_is_named_at_its_version(world: World) -> None:
    job = await world.ended_job()
    await world.recorder()
    [_, _, failed] = await world.store.job_records(job)
    forged = dataclasses.replace(failed, state=failed.state.replace(b'"boom"', b'"fine"'))
    proof = await world.verifier(Tampered(world.store, {3: forged}))(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.BROKEN
    assert "version 3's content does not match its digest" in proof.check.problems


async def test_a_removed_event_is_a_missing_version(world: World) -> None:
    job = await world.ended_job()
    await world.recorder()
    proof = await world.verifier(Tampered(world.store, {2: None}))(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.BROKEN
    assert "version 2 is missing (found 3)" in proof.check.problems


async def test_a_truncated_job_is_not_what_its_checkpoint_holds(world: World) -> None:
    job = await world.ended_job()
    await world.recorder()
    proof = await world.verifier(Tampered(world.store, {3: None}))(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.BROKEN
    assert any("(version 2) is not the one the checkpoint" in p for p in proof.check.problems)


async def test_a_checkpoint_signed_by_another_key_is_not_valid(world: World) -> None:
    job = await world.ended_job()
    await world.recorder()
    proof = await world.verifier(keys=OTHER_KEYS)(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.BROKEN
    assert proof.check.signature is SignatureCheck.UNKNOWN_KEY


async def test_a_checkpoint_from_before_heads_roots_leaves_the_job_unproven(world: World) -> None:
    job = await world.ended_job()
    await world.recorder()
    for position, checkpoint in list(world.checkpoints.items.items()):
        world.checkpoints.items[position] = dataclasses.replace(checkpoint, heads_root="")
    proof = await world.verifier()(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.UNPROVEN


async def test_another_tenants_job_is_not_found(world: World) -> None:
    job = await world.ended_job()
    with pytest.raises(FetcherError) as caught:
        await world.verifier()(job, tenant=Tenant("someone-else"))
    assert caught.value.code == "FET-1001"


async def _one_checkpoint(world: World) -> None:
    """One checkpoint over everything the log holds."""
    recorder = RecordCheckpoints(
        world.store, world.checkpoints, KEYS.signer, world.clock, every_seconds=0
    )
    assert await recorder() == 1


async def _proof(world: World, job: UUID) -> dict:
    prove = ProveJob(EventSourcedJobs(world.store), world.store, world.checkpoints)
    return (await prove(job, tenant=SINGLE_TENANT)).to_json()


async def test_a_jobs_proof_checks_offline_and_shows_no_other_job(world: World) -> None:
    jobs_ = [await world.ended_job() for _ in range(5)]
    await _one_checkpoint(world)
    job = jobs_[2]
    proof = json.loads(json.dumps(await _proof(world, job)))  # as it travels
    index = sorted(str(j) for j in jobs_).index(str(job))  # leaves in job id order
    assert proof["inclusion"]["size"] == 5 and proof["inclusion"]["index"] == index
    assert len(proof["inclusion"]["path"]) == (1 if index == 4 else 3)
    text = json.dumps(proof)
    assert all(str(other) not in text for other in jobs_ if other != job)
    assert "heads" not in proof["checkpoint"]
    checked = check_proof(proof, KEYS.keys)
    assert checked.ok, checked.problems
    assert any(f"leaf {index} of 5" in item for item in checked.checked)


async def test_a_proof_fails_when_anything_in_it_changes(world: World) -> None:
    jobs_ = [await world.ended_job() for _ in range(3)]
    await _one_checkpoint(world)
    proof = await _proof(world, jobs_[0])

    changed = copy.deepcopy(proof)
    state = base64.b64decode(changed["records"][2]["state"]).replace(b'"boom"', b'"fine"')
    changed["records"][2]["state"] = base64.b64encode(state).decode()
    assert (
        "version 3's content does not match its digest" in check_proof(changed, KEYS.keys).problems
    )

    other = copy.deepcopy(proof)
    other["jobId"] = str(jobs_[1])  # another job's id on this job's records and path
    assert not check_proof(other, KEYS.keys).ok

    moved = copy.deepcopy(proof)
    moved["inclusion"]["index"] = (moved["inclusion"]["index"] + 1) % 3
    assert any("is not the one the checkpoint" in p for p in check_proof(moved, KEYS.keys).problems)

    rooted = copy.deepcopy(proof)
    rooted["checkpoint"]["heads_root"] = "0" * 64  # a root the signature does not cover
    assert "the checkpoint's signature is invalid" in check_proof(rooted, KEYS.keys).problems

    assert check_proof(proof, OTHER_KEYS.keys).problems == (
        "the checkpoint's signature is unknown key",
    )
    assert check_proof(proof, KEYS.keys).ok


async def test_a_job_not_yet_checkpointed_has_a_proof_without_checkpoint(world: World) -> None:
    job = await world.ended_job()
    proof = await _proof(world, job)
    assert proof["checkpoint"] is None
    assert check_proof(proof, KEYS.keys).problems == (
        "no checkpoint holds the job's last event yet",
    )


async def test_a_document_that_is_not_a_proof_is_said_so(world: World) -> None:
    with pytest.raises(ProofError):
        check_proof({"format": "something else"}, KEYS.keys)
    with pytest.raises(ProofError):
        check_proof({"format": FORMAT, "jobId": "not-a-uuid", "records": []}, KEYS.keys)


async def _witnessed(world: World) -> InMemoryResultStorage:
    """The checkpoints recorded so far, witnessed as the relay does."""
    witnesses = InMemoryResultStorage()
    await WitnessCheckpoints(world.checkpoints, witnesses, world.store)()
    return witnesses


def _with_witnesses(world: World, witnesses: InMemoryResultStorage) -> VerifyJob:
    prove = ProveJob(EventSourcedJobs(world.store), world.store, world.checkpoints)
    return VerifyJob(prove, KEYS.keys, witnesses)


async def test_the_checkpoint_is_compared_with_its_witness(world: World) -> None:
    job = await world.ended_job()
    await world.recorder()
    verify = _with_witnesses(world, await _witnessed(world))
    proof = await verify(job, tenant=SINGLE_TENANT)
    assert proof.verdict is Verdict.INTACT, proof.check.problems
    assert any("against its witness kept outside the database" in c for c in proof.check.checked)
    assert proof.notes == ()


async def test_a_checkpoint_re_signed_after_it_was_witnessed_is_broken(world: World) -> None:
    """Whoever holds the signing key can sign a new checkpoint at the same place; the witness
    written when the first was recorded still shows it."""
    job = await world.ended_job()
    await world.recorder()
    witnesses = await _witnessed(world)
    for position, checkpoint in list(world.checkpoints.items.items()):
        unsigned = dataclasses.replace(checkpoint, recorded_at="2030-01-01T00:00:00Z")
        world.checkpoints.items[position] = dataclasses.replace(
            unsigned, signature=KEYS.signer.sign(unsigned.message())
        )
    proof = await _with_witnesses(world, witnesses)(job, tenant=SINGLE_TENANT)
    assert proof.check.signature is SignatureCheck.VALID  # re-signed: the signature holds
    assert proof.verdict is Verdict.BROKEN
    assert any("differs from its witness" in p for p in proof.check.problems)


async def test_a_missing_or_unreadable_witness_is_said_and_changes_no_verdict(
    world: World,
) -> None:
    job = await world.ended_job()
    await world.recorder()
    missing = await _with_witnesses(world, InMemoryResultStorage())(job, tenant=SINGLE_TENANT)
    assert missing.verdict is Verdict.INTACT
    assert missing.notes and "no witness of the checkpoint" in missing.notes[0]
    away = InMemoryResultStorage(unavailable=True)
    unread = await _with_witnesses(world, away)(job, tenant=SINGLE_TENANT)
    assert unread.verdict is Verdict.INTACT
    assert unread.notes == ("the checkpoint's witness could not be read: object storage is away",)
