"""Checkpoints witnessed outside the database: each recorded checkpoint is also written to a
``WitnessStore`` (object storage) under a key that is never overwritten, so that someone who
can rewrite the database (records and checkpoints together) cannot rewrite what was witnessed.

``WitnessCheckpoints`` follows the checkpoint table from the position it last witnessed (kept
as a follower position of the event store, like the relay's other followers) and writes each
checkpoint it has not written yet: at least once, and writing one twice is harmless.
``compare_witnesses`` is the auditor's side: what the witnesses say about a store's
checkpoints.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from application.audit.verify import Break, BreakKind
from application.errors import PublishFailed, StorageError
from application.ports.audit import (
    CheckpointPublisher,
    CheckpointStore,
    WitnessConflict,
    WitnessStore,
)
from domain.audit_chain import Checkpoint

log = logging.getLogger(__name__)

FOLLOWER_NAME = "audit-witness"
EVENTS_FOLLOWER_NAME = "audit-witness-events"
PREFIX = "audit/checkpoints/"


def witness_key(checkpoint: Checkpoint) -> str:
    """``audit/checkpoints/<position, 20 digits>.json``: listed in position order."""
    return f"{PREFIX}{checkpoint.position:020d}.json"


def witness_body(checkpoint: Checkpoint) -> bytes:
    """The checkpoint as signed, without the job ids of its heads (``heads_sha256`` is what
    the signature covers), so a witness reveals no job."""
    return json.dumps(checkpoint.to_json(with_heads=False), sort_keys=True).encode()


def read_witness(data: bytes) -> Checkpoint:
    """A witness as written by ``witness_body`` (or a checkpoint event's body)."""
    return Checkpoint.from_json({**json.loads(data), "heads": None})


class Positions(Protocol):
    """A follower's recorded position (the event store's trackings)."""

    async def position(self, follower: str) -> int: ...

    async def advance(self, follower: str, notification_id: int) -> bool: ...


@dataclass(slots=True)
class PublishCheckpoints:
    """Publishes every checkpoint past the last one published as a signed CloudEvent (its
    own follower position: a broker that refuses them delays only this)."""

    checkpoints: CheckpointStore
    publisher: CheckpointPublisher
    positions: Positions
    batch: int = 100

    async def __call__(self) -> int:
        done = 0
        after = await self.positions.position(EVENTS_FOLLOWER_NAME)
        while page := await self.checkpoints.page(after, self.batch):
            for checkpoint in page:
                await self.publisher.publish_checkpoint(checkpoint)
                done += 1
                after = checkpoint.position
                await self.positions.advance(EVENTS_FOLLOWER_NAME, after)
            if len(page) < self.batch:
                break
        return done


@dataclass(slots=True)
class WitnessCheckpoints:
    """Writes every checkpoint past the last one witnessed to ``witnesses``."""

    checkpoints: CheckpointStore
    witnesses: WitnessStore
    positions: Positions
    batch: int = 100

    async def __call__(self) -> int:
        """One pass; the number of checkpoints witnessed. A conflict (another checkpoint
        already witnessed at that position) is logged and passed: the witness stays what it
        was, and the auditor's comparison names it."""
        done = 0
        after = await self.positions.position(FOLLOWER_NAME)
        while page := await self.checkpoints.page(after, self.batch):
            for checkpoint in page:
                try:
                    await self.witnesses.keep(witness_key(checkpoint), witness_body(checkpoint))
                except WitnessConflict:
                    log.error(
                        "audit.witness.conflict",
                        extra={"position": checkpoint.position, "key": witness_key(checkpoint)},
                    )
                done += 1
                after = checkpoint.position
                await self.positions.advance(FOLLOWER_NAME, after)
            if len(page) < self.batch:
                break
        if done:
            log.info("audit.witnessed", extra={"checkpoints": done, "position": after})
        return done


def record_then_witness(
    record: Callable[[], Awaitable[int]],
    witness: WitnessCheckpoints | None,
    publish: PublishCheckpoints | None = None,
) -> Callable[[], Awaitable[int]]:
    """One audit pass: record the checkpoints due, then witness and publish those not
    witnessed or published yet (each on its own: storage or a broker that is away is tried
    again on the next pass; nothing is skipped)."""

    async def audit() -> int:
        recorded = await record()
        if witness is not None:
            try:
                await witness()
            except StorageError as error:
                log.warning("audit.witness.failed", extra={"error": str(error)})
        if publish is not None:
            try:
                await publish()
            except PublishFailed as error:
                log.debug("audit.witness.event.failed", extra={"error": str(error)})
        return recorded

    return audit


def compare_witnesses(
    stored: Sequence[Checkpoint], witnessed: Iterable[Checkpoint]
) -> tuple[list[Break], list[Checkpoint]]:
    """The breaks the witnesses show in ``stored`` (the store's or a bundle's checkpoints), and
    the witnessed checkpoints the store does not hold as witnessed (to verify the log against
    as well).

    A witnessed checkpoint missing from the store is a rollback ("records after position P
    were removed or rewritten", P the store's last checkpoint before it); one that differs
    from the store's at its position is a rewrite."""
    by_position = {c.position: c for c in stored}
    breaks: list[Break] = []
    to_check: list[Checkpoint] = []
    for witness in sorted(witnessed, key=lambda c: c.position):
        held = by_position.get(witness.position)
        if held is None:
            before = [c.position for c in stored if c.position < witness.position]
            since = max(before, default=0)
            breaks.append(
                Break(
                    BreakKind.MISSING,
                    f"checkpoint {witness.position} witnessed at {witness.recorded_at} is "
                    f"missing; records after position {since} were removed or rewritten",
                    position=witness.position,
                )
            )
            to_check.append(witness)
        elif held.to_json(with_heads=False) != witness.to_json(with_heads=False):
            breaks.append(
                Break(
                    BreakKind.CHANGED,
                    f"checkpoint {witness.position} witnessed at {witness.recorded_at} differs "
                    "from the one stored there; the records it covers were rewritten",
                    position=witness.position,
                )
            )
            to_check.append(witness)
    return breaks, to_check
