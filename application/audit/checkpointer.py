"""Records signed checkpoints of the event log every N records or T seconds."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime

from application.ports.audit import AuditLog, CheckpointSigner, CheckpointStore
from application.ports.clock import Clock
from application.timefmt import rfc3339nano
from domain.audit_chain import (
    ZERO_ROOT,
    Checkpoint,
    Record,
    heads_root,
    log_step,
    record_digest,
)

log = logging.getLogger(__name__)

FOLLOWER_NAME = "audit-checkpoints"


@dataclass(slots=True)
class RecordCheckpoints:
    """Folds the log from the latest checkpoint on and records a checkpoint when
    ``every_records`` records have followed the last one, or ``every_seconds`` have passed
    and at least one has. Several relays may run it: a second checkpoint at a position is
    ignored, and the loser goes on from the winner's."""

    log: AuditLog
    checkpoints: CheckpointStore
    signer: CheckpointSigner
    clock: Clock
    every_records: int = 1000
    every_seconds: float = 60.0
    batch: int = 1000
    _position: int = -1
    _count: int = 0
    _root: bytes = field(default=bytes.fromhex(ZERO_ROOT))
    _heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    _since: int = 0
    _last_time: datetime | None = None

    async def _resume(self) -> None:
        latest = await self.checkpoints.latest()
        self._heads = {}
        self._since = 0
        if latest is None:
            self._position, self._count, self._root = 0, 0, bytes.fromhex(ZERO_ROOT)
            self._last_time = self.clock.now()
            return
        self._position, self._count = latest.position, latest.count
        self._root = bytes.fromhex(latest.root)
        self._last_time = datetime.fromisoformat(latest.recorded_at)

    async def __call__(self) -> int:
        """One pass over what the log holds now; returns the number of checkpoints recorded."""
        if self._position < 0:
            await self._resume()
        recorded = 0
        while True:
            records = await self.log.read_records(self._position, self.batch)
            for record in records:
                self._fold(record)
                if self._since >= self.every_records:
                    recorded += await self._record()
            if len(records) < self.batch:
                break
        assert self._last_time is not None
        elapsed = (self.clock.now() - self._last_time).total_seconds()
        if self._since and elapsed >= self.every_seconds:
            recorded += await self._record()
        return recorded

    def _fold(self, record: Record) -> None:
        self._root = log_step(self._root, record)
        self._count += 1
        self._position = record.position
        self._since += 1
        if record.is_job_event:
            self._heads[record.originator_id] = (record.version, _digest(record))

    async def _record(self) -> int:
        now = self.clock.now()
        unsigned = Checkpoint(
            position=self._position,
            count=self._count,
            root=self._root.hex(),
            recorded_at=rfc3339nano(now),
            key_id=self.signer.key_id,
            heads=dict(self._heads),
            heads_root=heads_root(self._heads),
        )
        signed = replace(unsigned, signature=self.signer.sign(unsigned.message()))
        await self.checkpoints.add(signed)
        latest = await self.checkpoints.latest()
        if latest is not None and latest.position != signed.position:
            log.info("audit.checkpoint.superseded position=%d", signed.position)
            self._position = -1  # another relay recorded further: go on from its checkpoint
            await self._resume()
            return 0
        self._heads = {}
        self._since = 0
        self._last_time = now
        log.info("audit.checkpoint position=%d count=%d", signed.position, signed.count)
        return 1


def _digest(record: Record) -> str:
    return record_digest(record)
