"""VerifyJob: the console's "verify": a job's inclusion proof built and checked on the server,
exactly as ``fetcher audit verify-job`` checks it offline (``application.audit.proof``).

A whole-log verification (``fetcher audit verify``) also checks every checkpoint's running
hash over every record; that needs the whole log and stays the auditor's tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID

from application.audit.proof import ProofCheck, ProveJob, check_proof
from application.ports.audit import CheckpointKeys
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


@dataclass(slots=True)
class VerifyJob:
    """The verdict on a job of ``tenant`` (404 FET-1001 for another tenant's job)."""

    prove: ProveJob
    keys: CheckpointKeys

    async def __call__(self, job_id: UUID, *, tenant: Tenant) -> JobVerdict:
        check = check_proof((await self.prove(job_id, tenant=tenant)).to_json(), self.keys)
        return JobVerdict(job_id, _verdict(check), check)


def _verdict(check: ProofCheck) -> Verdict:
    if not check.chain_intact:
        return Verdict.BROKEN
    if check.checkpoint is None:
        return Verdict.UNSEALED
    if not check.checkpoint.heads_root:
        return Verdict.UNPROVEN
    return Verdict.BROKEN if check.problems else Verdict.INTACT
