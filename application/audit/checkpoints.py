"""ListCheckpoints: the signed checkpoints of the event log, for auditors."""

from __future__ import annotations

from dataclasses import dataclass, replace

from application.ports.audit import CheckpointStore
from domain.audit_chain import Checkpoint

MAX_LIMIT = 100


@dataclass(slots=True)
class ListCheckpoints:
    """Checkpoints after position ``after``, ascending. Without ``with_heads`` (a tenant's
    view of a shared log) the job heads are left out: the signature still verifies, over
    their digest, and no other tenant's job id is shown."""

    checkpoints: CheckpointStore

    async def __call__(
        self, *, after: int = 0, limit: int = 20, with_heads: bool = True
    ) -> list[Checkpoint]:
        found = await self.checkpoints.page(max(0, after), max(1, min(limit, MAX_LIMIT)))
        if with_heads:
            return found
        return [replace(c, heads=None) for c in found]
