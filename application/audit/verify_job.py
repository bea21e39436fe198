"""VerifyJob: the console's "verify": a job's inclusion proof built and checked on the server,
exactly as ``fetcher audit verify-job`` checks it offline (``application.audit.proof``).

Where the process can read the checkpoints' witnesses (the object storage the relay writes
them to), the checkpoint holding the job is also compared with its witness: a checkpoint
re-signed over rewritten records differs from the one witnessed when it was recorded.

A whole-log verification (``fetcher audit verify``) also checks every checkpoint's running
hash over every record; that needs the whole log and stays the auditor's tool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from uuid import UUID

from application.audit.proof import ProofCheck, ProveJob, check_proof
from application.audit.witness import read_witness, witness_key
from application.errors import StorageError
from application.ports.audit import CheckpointKeys, WitnessStore
from domain.audit_chain import Checkpoint
from domain.tenant import Tenant


class Verdict(StrEnum):
    INTACT = "intact"
    UNSEALED = "not yet checkpointed"
    """The chain holds; no checkpoint holds the last event yet (the relay records one soon)."""
    UNPROVEN = "checkpointed before per-job proofs"
    """The chain holds; its checkpoint predates signed heads roots (verify the whole log)."""
    BROKEN = "broken"


@dataclass(frozen=True, slots=True)
class JobVerdict:
    job_id: UUID
    verdict: Verdict
    check: ProofCheck
    notes: tuple[str, ...] = ()
    """What could not be checked, and why (the verdict does not rest on it)."""


@dataclass(slots=True)
class VerifyJob:
    """The verdict on a job of ``tenant`` (404 FET-1001 for another tenant's job)."""

    prove: ProveJob
    keys: CheckpointKeys
    witnesses: WitnessStore | None = None

    async def __call__(self, job_id: UUID, *, tenant: Tenant) -> JobVerdict:
        check = check_proof((await self.prove(job_id, tenant=tenant)).to_json(), self.keys)
        notes: tuple[str, ...] = ()
        replaced = False
        if self.witnesses is not None and check.checkpoint is not None:
            check, notes, replaced = await _against_witness(check, check.checkpoint, self.witnesses)
        return JobVerdict(job_id, Verdict.BROKEN if replaced else _verdict(check), check, notes)


async def _against_witness(
    check: ProofCheck, checkpoint: Checkpoint, witnesses: WitnessStore
) -> tuple[ProofCheck, tuple[str, ...], bool]:
    """The check with the witness's say added, notes, and whether the checkpoint is not the
    one witnessed."""
    key = witness_key(checkpoint)
    try:
        kept = await witnesses.witnessed(key)
    except StorageError:
        note = "the checkpoint's witness could not be read: object storage is away"
        return check, (note,), False
    if kept is None:
        note = (
            "no witness of the checkpoint is kept outside the database (witnessing is off, "
            "or it is not written yet)"
        )
        return check, (note,), False
    try:
        witnessed = read_witness(kept)
    except (ValueError, KeyError, TypeError):
        witnessed = None
    if witnessed is not None and witnessed.to_json() == checkpoint.to_json(with_heads=False):
        checked = f"the checkpoint against its witness kept outside the database ({key})"
        return replace(check, checked=(*check.checked, checked)), (), False
    problem = (
        f"the checkpoint at position {checkpoint.position} differs from its witness kept "
        "outside the database when it was recorded: the checkpoint was replaced"
    )
    return replace(check, problems=(*check.problems, problem)), (), True


def _verdict(check: ProofCheck) -> Verdict:
    if not check.chain_intact:
        return Verdict.BROKEN
    if check.checkpoint is None:
        return Verdict.UNSEALED
    if not check.checkpoint.heads_root:
        return Verdict.UNPROVEN
    return Verdict.BROKEN if check.problems else Verdict.INTACT
