"""VerifyJob: one job's proof, for the console: its chain of events, and the signed checkpoint
that holds its last event.

A whole-log verification (``fetcher audit verify``) also checks every checkpoint's running
hash over every record; that needs the whole log and stays the auditor's tool. This one reads
the job's own records and the checkpoints only, so it answers in a request, and says what it
checked and what it did not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from uuid import UUID

from application.audit.proof import holding_checkpoint
from application.ports.audit import AuditLog, CheckpointKeys, CheckpointStore, SignatureCheck
from application.ports.job_repository import Jobs
from domain.audit_chain import GENESIS, Checkpoint, content_digest, prev_digest_of, split_linked
from domain.tenant import Tenant


class Verdict(StrEnum):
    INTACT = "intact"
    """The chain holds and a checkpoint with a valid signature holds its last event."""
    UNSEALED = "not yet checkpointed"
    """The chain holds; no checkpoint covers the last event yet (the relay records one soon)."""
    BROKEN = "broken"


@dataclass(frozen=True, slots=True)
class EventCheck:
    version: int
    topic: str
    digest: str
    """The digest the event carries (empty for an event recorded before chaining)."""
    computed: str
    """The digest of its content, computed now."""
    links: bool
    """Whether it links to the event before it (the first to none)."""
    position: int = 0

    @property
    def content_holds(self) -> bool:
        return not self.digest or self.digest == self.computed


@dataclass(frozen=True, slots=True)
class JobProof:
    job_id: UUID
    verdict: Verdict
    events: tuple[EventCheck, ...]
    problems: tuple[str, ...]
    checkpoint: Checkpoint | None = None
    signature: SignatureCheck | None = None
    checked: tuple[str, ...] = field(default=())


@dataclass(slots=True)
class VerifyJob:
    """The proof of a job of ``tenant`` (404 FET-1001 for another tenant's job)."""

    jobs: Jobs
    log: AuditLog
    checkpoints: CheckpointStore | None
    keys: CheckpointKeys | None

    async def __call__(self, job_id: UUID, *, tenant: Tenant) -> JobProof:
        await self.jobs.get(job_id, tenant=tenant)
        records = await self.log.job_records(job_id)
        events: list[EventCheck] = []
        problems: list[str] = []
        previous = GENESIS
        for expected, record in enumerate(records, start=1):
            body, carried = split_linked(record.state)
            computed = content_digest(record.originator_id, record.version, record.topic, body)
            links = carried is None or prev_digest_of(body) == previous
            check = EventCheck(
                record.version, record.topic, carried or "", computed, links, record.position
            )
            events.append(check)
            if record.version != expected:
                problems.append(f"version {expected} is missing (found {record.version})")
            if not check.content_holds:
                problems.append(f"version {record.version}'s content does not match its digest")
            elif not links:
                problems.append(f"version {record.version} does not link to the version before")
            previous = carried if carried is not None else computed
        checked = [
            f"{len(events)} events: each one's content against the digest it carries",
            "each event's link to the one before it",
        ]
        if not events:
            problems.append("the job has no records")
        last = events[-1] if events else None
        checkpoint = await self._holding(job_id) if last is not None else None
        signature: SignatureCheck | None = None
        if checkpoint is not None and last is not None:
            head = (checkpoint.heads or {}).get(str(job_id))
            checked.append(
                f"checkpoint at position {checkpoint.position} holds version {head and head[0]}"
            )
            if head != (last.version, last.digest or last.computed):
                problems.append(
                    f"the checkpoint at position {checkpoint.position} holds another last "
                    f"event (version {head and head[0]}) than the log (version {last.version})"
                )
            if not checkpoint.heads_match:
                problems.append("the checkpoint's heads do not match their signed digest")
            if self.keys is not None:
                signature = self.keys.check(
                    checkpoint.key_id, checkpoint.message(), checkpoint.signature
                )
                checked.append(f"the checkpoint's signature by key {checkpoint.key_id}")
                if signature is not SignatureCheck.VALID:
                    problems.append(f"the checkpoint's signature is {signature.value}")
        if problems:
            verdict = Verdict.BROKEN
        elif checkpoint is None:
            verdict = Verdict.UNSEALED
        else:
            verdict = Verdict.INTACT
        return JobProof(
            job_id, verdict, tuple(events), tuple(problems), checkpoint, signature, tuple(checked)
        )

    async def _holding(self, job_id: UUID) -> Checkpoint | None:
        if self.checkpoints is None:
            return None
        return await holding_checkpoint(self.checkpoints, job_id)
