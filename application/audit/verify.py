"""Verifying the audit trail: every job's chain and every checkpoint, record by record.

``ChainVerifier`` is fed the log's records in position order (from the event store or from an
exported bundle) and names each break: which job, which version, what kind.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from application.ports.audit import CheckpointKeys, SignatureCheck
from domain.audit_chain import (
    GENESIS,
    ZERO_ROOT,
    Checkpoint,
    Record,
    content_digest,
    log_step,
    prev_digest_of,
    split_linked,
)

MAX_BREAKS = 1000
_TERMINAL = (":JobCompleted", ":JobFailed")


class BreakKind(StrEnum):
    CHANGED = "changed"
    MISSING = "missing"
    REORDERED = "reordered"
    UNSIGNED = "unsigned"
    BAD_SIGNATURE = "bad signature"


@dataclass(frozen=True, slots=True)
class Break:
    kind: BreakKind
    detail: str
    job: str | None = None
    version: int | None = None
    position: int | None = None

    def describe(self) -> str:
        where = []
        if self.job is not None:
            where.append(f"job {self.job}")
        if self.version is not None:
            where.append(f"version {self.version}")
        if self.position is not None:
            where.append(f"position {self.position}")
        return f"{self.kind.value}: {', '.join(where)}: {self.detail}"

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "job": self.job,
            "version": self.version,
            "position": self.position,
            "detail": self.detail,
        }


@dataclass(slots=True)
class VerifyReport:
    breaks: list[Break] = field(default_factory=list)
    records: int = 0
    job_events: int = 0
    jobs: int = 0
    unchained: int = 0
    """Job events recorded before chaining began (they carry no digest)."""
    chained_from: int | None = None
    """The position of the first chained event."""
    unchained_later: int = 0
    """Job events without digest after ``chained_from`` (written by an older process during a
    rolling upgrade); not a break: the checkpoints cover their content."""
    first_unchained_later: int | None = None
    checkpoints: int = 0
    covered_to: int = 0
    """The position of the last checkpoint that matched."""
    uncovered: int = 0
    """Records after the last checkpoint (no signature covers them yet)."""
    witnesses: int | None = None
    """Witnessed checkpoints compared (None: no witnesses given)."""

    @property
    def ok(self) -> bool:
        return not self.breaks

    def summary(self) -> str:
        lines = [
            f"records: {self.records}, job events: {self.job_events}, jobs: {self.jobs}",
            f"checkpoints: {self.checkpoints}, covered up to position {self.covered_to}, "
            f"{self.uncovered} records after the last checkpoint",
        ]
        if self.witnesses is not None:
            lines.append(f"witnesses: {self.witnesses} checkpoints kept outside the database")
        if self.unchained:
            where = (
                f"before position {self.chained_from}"
                if self.chained_from is not None
                else "(no chained event yet)"
            )
            lines.append(f"unchained {where}: {self.unchained} job events")
        if self.unchained_later:
            lines.append(
                f"unchained after chaining began: {self.unchained_later} job events, the first "
                f"at position {self.first_unchained_later} (written by an older version)"
            )
        if self.breaks:
            lines.append(f"FAIL: first break: {self.breaks[0].describe()}")
            if len(self.breaks) > 1:
                lines.append(f"{len(self.breaks) - 1} more breaks follow from it")
        else:
            lines.append("OK")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "records": self.records,
            "jobEvents": self.job_events,
            "jobs": self.jobs,
            "unchained": self.unchained,
            "chainedFrom": self.chained_from,
            "unchainedLater": self.unchained_later,
            "checkpoints": self.checkpoints,
            "coveredTo": self.covered_to,
            "uncovered": self.uncovered,
            "witnesses": self.witnesses,
            "breaks": [b.to_json() for b in self.breaks],
        }


class ChainVerifier:
    """Feed records in position order, then ``finish``.

    ``checkpoints`` are the checkpoints to check against the records: a list (sorted here),
    or an iterator in position order, read only as far as the records have come (so a large
    log's checkpoints are never all in memory); ``add_checkpoints`` gives more later. With
    ``anchor`` (a bundle's first checkpoint) the walk starts from its position, count and hash
    instead of the start of the log, and a job first seen at a later version is taken as begun
    before.
    """

    def __init__(
        self,
        keys: CheckpointKeys,
        checkpoints: Iterable[Checkpoint],
        *,
        anchor: Checkpoint | None = None,
    ) -> None:
        self._keys = keys
        self._pending: deque[Checkpoint] = deque()
        self._source: Iterator[Checkpoint] = iter(())
        if isinstance(checkpoints, Sequence):
            self._pending.extend(sorted(checkpoints, key=lambda c: c.position))
        else:
            self._source = iter(checkpoints)
        self._after = anchor.position if anchor is not None else -1
        self._due: float = -1
        """Records at positions up to this have no checkpoint due before them."""
        self._report = VerifyReport()
        self._heads: dict[str, tuple[int, str]] = {}
        self._ended: list[str] = []
        """Jobs whose last event (completed or failed) came since the last checkpoint."""
        self._since: dict[tuple[str, int], int] = {}
        """The position of each (job, version) fed since the last checkpoint, to name a record
        inserted before the next one."""
        self._root = bytes.fromhex(ZERO_ROOT)
        self._count = 0
        self._last = 0
        self._since_checkpoint = 0
        self._partial = anchor is not None and anchor.position > 0
        if anchor is not None:
            self._check_signature(anchor)
            self._report.checkpoints += 1
            self._root = bytes.fromhex(anchor.root)
            self._count = anchor.count
            self._last = anchor.position
            self._report.covered_to = anchor.position

    @property
    def report(self) -> VerifyReport:
        return self._report

    def _break(self, kind: BreakKind, detail: str, **where: object) -> None:
        if len(self._report.breaks) < MAX_BREAKS:
            self._report.breaks.append(Break(kind, detail, **where))  # type: ignore[arg-type]

    def add_checkpoints(self, checkpoints: Iterable[Checkpoint]) -> None:
        """More checkpoints, in position order, after those given so far."""
        self._pending.extend(checkpoints)
        self._due = -1

    def _next_position(self) -> float:
        """Where the next checkpoint to check is (infinity when there is none yet): records
        up to there need no look at the checkpoints."""
        while True:
            if not self._pending:
                found = next(self._source, None)
                if found is None:
                    return math.inf
                self._pending.append(found)
            if self._pending[0].position > self._after:
                return self._pending[0].position
            self._pending.popleft()

    def _next_checkpoint(self, before: int | None) -> Checkpoint | None:
        """The next checkpoint to check (at a position under ``before``; None: any), taken
        off the queue; those at or before the anchor are passed over."""
        while True:
            if not self._pending:
                found = next(self._source, None)
                if found is None:
                    return None
                self._pending.append(found)
            head = self._pending[0]
            if head.position <= self._after:
                self._pending.popleft()
                continue
            if before is not None and head.position >= before:
                return None
            return self._pending.popleft()

    def feed(self, record: Record) -> None:
        if record.position > self._due:
            while (due := self._next_checkpoint(record.position)) is not None:
                self._check(due)
            self._due = self._next_position()
        if record.position <= self._last:
            self._break(
                BreakKind.REORDERED,
                f"the log goes back from position {self._last}",
                job=record.originator_id,
                version=record.version,
                position=record.position,
            )
        self._last = max(self._last, record.position)
        self._root = log_step(self._root, record)
        self._count += 1
        self._since_checkpoint += 1
        self._report.records += 1
        if record.is_job_event:
            self._job_event(record)

    def feed_all(self, records: Iterable[Record]) -> None:
        for record in records:
            self.feed(record)

    def _job_event(self, record: Record) -> None:
        report = self._report
        report.job_events += 1
        job, version, position = record.originator_id, record.version, record.position
        body, carried = split_linked(record.state)
        computed = content_digest(job, version, record.topic, body)
        head = self._heads.get(job)
        if head is None:
            report.jobs += 1
        if carried is None:
            # Recorded by a process of the version before chaining (before the upgrade, or
            # during a rolling one). Its content is still covered by the checkpoints, and the
            # next chained event links to its computed digest.
            if report.chained_from is None:
                report.unchained += 1
            else:
                report.unchained_later += 1
                if report.first_unchained_later is None:
                    report.first_unchained_later = position
        else:
            if report.chained_from is None:
                report.chained_from = position
            if carried != computed:
                moved = _version_of(record, body, carried, max(version, head[0] if head else 0))
                if moved is not None:
                    self._break(
                        BreakKind.REORDERED,
                        f"it holds the event recorded as version {moved}",
                        job=job,
                        version=version,
                        position=position,
                    )
                else:
                    self._break(
                        BreakKind.CHANGED,
                        "its content does not match its digest",
                        job=job,
                        version=version,
                        position=position,
                    )
            elif head is not None and version == head[0] + 1:
                if prev_digest_of(body) != head[1]:
                    self._break(
                        BreakKind.CHANGED,
                        f"version {version} was recorded after another version {head[0]}",
                        job=job,
                        version=head[0],
                        position=position,
                    )
            elif head is None and version == 1 and prev_digest_of(body) != GENESIS:
                self._break(
                    BreakKind.CHANGED,
                    "the job's first event links to a predecessor",
                    job=job,
                    version=version,
                    position=position,
                )
        expected = head[0] + 1 if head is not None else 1
        if version < expected:
            self._break(
                BreakKind.REORDERED,
                f"it appears in the log after version {expected - 1}",
                job=job,
                version=version,
                position=position,
            )
            return
        if version > expected and not (head is None and self._partial):
            self._break(
                BreakKind.MISSING,
                f"version {version} follows version {expected - 1}",
                job=job,
                version=expected,
                position=position,
            )
        # A changed record keeps the digest it carries as the job's head: the next event
        # links to that, so one change is named once, at the record changed.
        self._heads[job] = (version, carried if carried is not None else computed)
        if record.topic.endswith(_TERMINAL):
            self._ended.append(job)
        self._since[(job, version)] = position

    def _check_signature(self, checkpoint: Checkpoint) -> bool:
        where = {"position": checkpoint.position}
        if not checkpoint.signature:
            self._break(BreakKind.UNSIGNED, "the checkpoint has no signature", **where)
            return False
        result = self._keys.check(checkpoint.key_id, checkpoint.message(), checkpoint.signature)
        if result is SignatureCheck.UNKNOWN_KEY:
            self._break(
                BreakKind.UNSIGNED,
                f"the checkpoint is signed with key {checkpoint.key_id!r}, "
                "which is not among the public keys",
                **where,
            )
            return False
        if result is SignatureCheck.INVALID:
            self._break(
                BreakKind.BAD_SIGNATURE,
                f"the checkpoint's signature does not verify with key {checkpoint.key_id!r}",
                **where,
            )
            return False
        return True

    def _check(self, checkpoint: Checkpoint) -> None:
        self._report.checkpoints += 1
        signed = self._check_signature(checkpoint)
        before = len(self._report.breaks)
        heads = checkpoint.heads or {}
        if not checkpoint.heads_match:
            self._break(
                BreakKind.CHANGED,
                "its list of job heads is not the one that was signed",
                position=checkpoint.position,
            )
        # Records inserted before the checkpoint first: they shift later records past it, so
        # the jobs those belonged to then look short (named after, as missing).
        for job, (version, _) in sorted(heads.items()):
            head = self._heads.get(job)
            if head is not None and head[0] > version:
                extra = version + 1
                position = self._since.get((job, extra))
                self._break(
                    BreakKind.CHANGED,
                    f"the log holds version {extra} of the job before position "
                    f"{checkpoint.position}, where the checkpoint ends it at version {version}: "
                    "a record was inserted",
                    job=job,
                    version=extra,
                    position=position,
                )
        for job, (version, digest) in sorted(heads.items()):
            head = self._heads.get(job)
            if head is None:
                self._break(
                    BreakKind.MISSING,
                    f"the job is absent; the checkpoint at position {checkpoint.position} "
                    f"holds it at version {version}",
                    job=job,
                    version=1,
                )
            elif head[0] < version:
                self._break(
                    BreakKind.MISSING,
                    f"the log ends the job at version {head[0]}; the checkpoint at position "
                    f"{checkpoint.position} holds it at version {version} (removed, or moved "
                    "past the checkpoint by a record inserted before it)",
                    job=job,
                    version=head[0] + 1,
                )
            elif head[0] == version and head[1] != digest:
                self._break(
                    BreakKind.CHANGED,
                    f"it differs from the checkpoint at position {checkpoint.position}",
                    job=job,
                    version=version,
                )
        if (self._root.hex(), self._count) != (checkpoint.root, checkpoint.count):
            if len(self._report.breaks) == before:
                kind = BreakKind.MISSING if self._count < checkpoint.count else BreakKind.CHANGED
                self._break(
                    kind,
                    f"the log up to here holds {self._count} records and another hash; the "
                    f"checkpoint signed {checkpoint.count}",
                    position=checkpoint.position,
                )
        elif signed and len(self._report.breaks) == before:
            self._report.covered_to = checkpoint.position
        self._since_checkpoint = 0
        self._since.clear()
        # A job that ended before this checkpoint, and is in its heads, needs its head no
        # more: memory follows the jobs still running, not every job ever seen. (A version
        # forged after its end then reads as a new job that begins past version 1: missing.)
        for job in self._ended:
            self._heads.pop(job, None)
        self._ended.clear()

    def finish(self) -> VerifyReport:
        while (due := self._next_checkpoint(None)) is not None:
            self._check(due)
        self._report.uncovered = self._since_checkpoint
        if self._report.records and not self._report.checkpoints:
            self._break(BreakKind.UNSIGNED, "no checkpoint covers any of the records")
        return self._report


def _version_of(record: Record, body: bytes, carried: str, upto: int) -> int | None:
    """The version whose digest ``carried`` is, for this content, if another one."""
    for version in range(1, upto + 3):
        if version != record.version and (
            content_digest(record.originator_id, version, record.topic, body) == carried
        ):
            return version
    return None
