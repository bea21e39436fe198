"""Ports of the audit trail: the log as stored, the checkpoints, and their signatures."""

from __future__ import annotations

from enum import Enum
from typing import Protocol
from uuid import UUID

from domain.audit_chain import Checkpoint, Record


class AuditLog(Protocol):
    """The event store's log, record by record, exactly as stored."""

    async def read_records(self, after: int, limit: int) -> list[Record]:
        """Records with positions greater than ``after``, ascending, at most ``limit``."""
        ...

    async def job_records(self, job_id: UUID) -> list[Record]:
        """One job's records as stored, oldest version first. ``position`` is the record's
        place in the log where the store can tell it by stream, else 0."""
        ...

    async def last_notification_id(self) -> int: ...


class CheckpointStore(Protocol):
    """Recorded checkpoints; at most one per position (a second one there is ignored)."""

    async def latest(self) -> Checkpoint | None: ...

    async def add(self, checkpoint: Checkpoint) -> None: ...

    async def page(self, after: int = 0, limit: int = 100) -> list[Checkpoint]:
        """Checkpoints with positions greater than ``after``, ascending, at most ``limit``."""
        ...

    async def holding(self, job_id: UUID) -> Checkpoint | None:
        """The newest checkpoint that names the job among its heads (each checkpoint names
        the jobs recorded since the one before it, at the version they stood at), or None."""
        ...

    async def close(self) -> None: ...


class CheckpointSigner(Protocol):
    @property
    def key_id(self) -> str: ...

    def sign(self, message: bytes) -> str:
        """The signature of ``message`` (base64)."""
        ...


class SignatureCheck(Enum):
    VALID = "valid"
    UNKNOWN_KEY = "unknown key"
    INVALID = "invalid"


class CheckpointKeys(Protocol):
    """Public keys by key id (every key version, including rotated ones)."""

    def check(self, key_id: str, message: bytes, signature: str) -> SignatureCheck: ...


class WitnessConflict(Exception):
    """A witness already holds other bytes under the key: it is never overwritten."""


class WitnessStore(Protocol):
    """Where checkpoints are kept outside the database, each under a key written once.

    - ``keep`` writes ``data`` at ``key`` unless something is there: the same bytes again is
      nothing to do; other bytes raise ``WitnessConflict`` and are left as they are.
    - ``kept`` returns every ``(key, data)`` under ``prefix`` (a folder of keys).
    - ``witnessed`` returns the data kept at ``key``, or None.
    - A store that cannot be reached raises ``application.errors.StorageError``.
    """

    async def keep(self, key: str, data: bytes) -> None: ...

    async def kept(self, prefix: str) -> list[tuple[str, bytes]]: ...

    async def witnessed(self, key: str) -> bytes | None: ...


class CheckpointPublisher(Protocol):
    """Publishes each audit checkpoint as a signed CloudEvent on the events exchange (as the
    job events are: confirmed, persistent, signed with the external key); raises
    ``application.errors.PublishFailed`` otherwise."""

    async def publish_checkpoint(self, checkpoint: Checkpoint) -> None: ...
