"""A job's inclusion proof, for a tenant's auditor: the job's own records as stored, the signed
checkpoint that holds its last event (without the other jobs' heads), and the Merkle path from
the job's head to the checkpoint's signed ``heads_root``.

With it and the audit public key, the auditor checks the job's chain and its place in a
signed checkpoint offline, without seeing any other job; ``check_proof`` is that check.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from application.ports.audit import AuditLog, CheckpointKeys, CheckpointStore, SignatureCheck
from application.ports.job_repository import Jobs
from domain.audit_chain import (
    GENESIS,
    Checkpoint,
    Record,
    content_digest,
    head_leaf,
    heads_leaves,
    inclusion_path,
    prev_digest_of,
    root_from_path,
    split_linked,
)
from domain.tenant import Tenant

FORMAT = "fetcher-job-proof-v1"


def chain_problems(job_id: str, records: list[Record]) -> tuple[list[str], tuple[int, str] | None]:
    """What is wrong with a job's chain of records, and its head (version, digest)."""
    problems: list[str] = []
    previous, head = GENESIS, None
    for expected, record in enumerate(records, start=1):
        body, carried = split_linked(record.state)
        computed = content_digest(job_id, record.version, record.topic, body)
        if record.version != expected:
            problems.append(f"version {expected} is missing (found {record.version})")
        if carried is not None and carried != computed:
            problems.append(f"version {record.version}'s content does not match its digest")
        elif carried is not None and prev_digest_of(body) != previous:
            problems.append(f"version {record.version} does not link to the version before")
        previous = carried if carried is not None else computed
        head = (record.version, previous)
    if not records:
        problems.append("the job has no records")
    return problems, head


@dataclass(frozen=True, slots=True)
class JobInclusion:
    job_id: UUID
    records: tuple[Record, ...]
    checkpoint: Checkpoint | None
    """Without heads; None while no checkpoint holds the job's last event."""
    index: int = 0
    size: int = 0
    path: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "jobId": str(self.job_id),
            "records": [
                {
                    "version": r.version,
                    "topic": r.topic,
                    "state": base64.b64encode(r.state).decode("ascii"),
                }
                for r in self.records
            ],
            "checkpoint": (
                None if self.checkpoint is None else self.checkpoint.to_json(with_heads=False)
            ),
            "inclusion": {"index": self.index, "size": self.size, "path": list(self.path)},
        }


@dataclass(slots=True)
class ProveJob:
    """The inclusion proof of a job of ``tenant`` (404 FET-1001 for another tenant's job)."""

    jobs: Jobs
    log: AuditLog
    checkpoints: CheckpointStore

    async def __call__(self, job_id: UUID, *, tenant: Tenant) -> JobInclusion:
        await self.jobs.get(job_id, tenant=tenant)
        records = tuple(await self.log.job_records(job_id))
        last = records[-1] if records else None
        checkpoint = await self.checkpoints.holding(job_id)
        named = checkpoint.heads.get(str(job_id)) if checkpoint and checkpoint.heads else None
        if named is not None and last is not None and named[0] < last.version:
            # Its last events came after the newest checkpoint naming it: not yet held.
            checkpoint = None
        if checkpoint is None or checkpoint.heads is None or not checkpoint.heads_root:
            # Not yet checkpointed, or held by a checkpoint from before roots were signed.
            shown = None if checkpoint is None else replace(checkpoint, heads=None)
            return JobInclusion(job_id, records, shown)
        leaves = [leaf for _, leaf in heads_leaves(checkpoint.heads)]
        index = sorted(checkpoint.heads).index(str(job_id))
        path = tuple(node.hex() for node in inclusion_path(leaves, index))
        return JobInclusion(
            job_id, records, replace(checkpoint, heads=None), index, len(leaves), path
        )


@dataclass(frozen=True, slots=True)
class ProofCheck:
    problems: tuple[str, ...]
    checked: tuple[str, ...]
    checkpoint: Checkpoint | None
    chain_intact: bool
    """Whether the job's own events hold (content, links, no version missing)."""
    signature: SignatureCheck | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.checkpoint is not None


class ProofError(ValueError):
    """A document that is not a job proof."""


def check_proof(doc: Mapping[str, Any], keys: CheckpointKeys) -> ProofCheck:
    """Checks a proof offline: the job's chain, its head's path to the checkpoint's signed
    ``heads_root``, and the checkpoint's signature with ``keys``."""
    try:
        if doc.get("format") != FORMAT:
            raise ProofError(f"not a job proof (format {doc.get('format')!r})")
        job_id = str(UUID(str(doc["jobId"])))
        records = [
            Record(0, job_id, int(r["version"]), str(r["topic"]), base64.b64decode(r["state"]))
            for r in doc["records"]
        ]
        raw = doc.get("checkpoint")
        checkpoint = None if raw is None else Checkpoint.from_json({**raw, "heads": None})
        inclusion = doc.get("inclusion") or {}
        index, size = int(inclusion.get("index", 0)), int(inclusion.get("size", 0))
        path = [bytes.fromhex(str(node)) for node in inclusion.get("path", [])]
    except (KeyError, TypeError, ValueError, binascii.Error) as error:
        if isinstance(error, ProofError):
            raise
        raise ProofError(f"not a job proof: {type(error).__name__}: {error}") from None
    problems, head = chain_problems(job_id, records)
    intact = not problems
    checked = [
        f"{len(records)} events: each one's content against the digest it carries",
        "each event's link to the one before it",
    ]
    if checkpoint is None:
        problems.append("no checkpoint holds the job's last event yet")
        return ProofCheck(tuple(problems), tuple(checked), None, intact)
    if not checkpoint.heads_root:
        problems.append(
            "the checkpoint holding the job was recorded before heads were signed as a Merkle "
            "root: verify the whole log (fetcher audit verify)"
        )
        return ProofCheck(tuple(problems), tuple(checked), checkpoint, intact)
    if head is not None:
        root = root_from_path(head_leaf(job_id, *head), index, size, path)
        checked.append(
            f"the head (version {head[0]}) is leaf {index} of {size} under the checkpoint's "
            f"heads root, at position {checkpoint.position}"
        )
        if root is None or root.hex() != checkpoint.heads_root:
            problems.append(
                f"the job's last event (version {head[0]}) is not the one the checkpoint at "
                f"position {checkpoint.position} holds"
            )
    signature = keys.check(checkpoint.key_id, checkpoint.message(), checkpoint.signature)
    checked.append(f"the checkpoint's signature by key {checkpoint.key_id}")
    if signature is not SignatureCheck.VALID:
        problems.append(f"the checkpoint's signature is {signature.value}")
    return ProofCheck(tuple(problems), tuple(checked), checkpoint, intact, signature)
