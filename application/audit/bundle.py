"""Audit bundles: a stretch of the log and the checkpoints that cover it, as JSON lines.

Line 1 is a header; then ``anchor`` (the checkpoint the stretch starts after, if any), the
``event`` records in position order and the ``checkpoint`` lines. Each event line carries the
stored state as it is (``state``: the stored JSON text) and, for readers, its job, type,
timestamp and digests, which are taken from the state again when verifying.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from application.audit.verify import Break, BreakKind, ChainVerifier, VerifyReport
from application.audit.witness import compare_witnesses
from application.ports.audit import AuditLog, CheckpointKeys, CheckpointStore
from domain.audit_chain import Checkpoint, Record, parse_state

FORMAT = "fetcher-audit-bundle-v1"
PAGE = 5000


class BundleError(ValueError):
    """A bundle that cannot be read (not one of ours, or a line that is not JSON)."""


Bound = int | datetime | None


def _at_or_before(checkpoint: Checkpoint, bound: int | datetime) -> bool:
    if isinstance(bound, int):
        return checkpoint.position <= bound
    return datetime.fromisoformat(checkpoint.recorded_at) <= bound


def _at_or_after(checkpoint: Checkpoint, bound: int | datetime) -> bool:
    if isinstance(bound, int):
        return checkpoint.position >= bound
    return datetime.fromisoformat(checkpoint.recorded_at) >= bound


async def all_checkpoints(store: CheckpointStore) -> list[Checkpoint]:
    out: list[Checkpoint] = []
    after = 0
    while page := await store.page(after, 1000):
        out.extend(page)
        after = page[-1].position
    return out


async def records_between(log: AuditLog, after: int, upto: int | None) -> AsyncIterator[Record]:
    """Records with positions in (after, upto] (to the end of the log without ``upto``). The
    next page is read while the caller works through the current one."""
    pending: asyncio.Future[list[Record]] | None = asyncio.ensure_future(
        log.read_records(after, PAGE)
    )
    try:
        while pending is not None:
            page = await pending
            if len(page) == PAGE and (upto is None or page[-1].position < upto):
                pending = asyncio.ensure_future(log.read_records(page[-1].position, PAGE))
            else:
                pending = None
            for record in page:
                if upto is not None and record.position > upto:
                    return
                yield record
    finally:
        if pending is not None and not pending.done():
            pending.cancel()


@dataclass(slots=True)
class Stretch:
    """Which part of the log a bundle holds: after ``anchor`` up to ``upto`` (None: the end)."""

    anchor: Checkpoint | None
    upto: int | None
    checkpoints: list[Checkpoint] = field(default_factory=list)


def choose_stretch(checkpoints: list[Checkpoint], since: Bound, until: Bound) -> Stretch:
    """From the last checkpoint at or before ``since`` to the first at or after ``until``, so
    that every record between ``since`` and ``until`` is covered where a checkpoint exists."""
    anchor = None
    if since is not None:
        before = [c for c in checkpoints if _at_or_before(c, since)]
        anchor = before[-1] if before else None
    upto = None
    if until is not None:
        after = [c for c in checkpoints if _at_or_after(c, until)]
        upto = after[0].position if after else None
    start = anchor.position if anchor else 0
    inside = [c for c in checkpoints if c.position > start and (upto is None or c.position <= upto)]
    return Stretch(anchor, upto, inside)


def event_line(record: Record) -> dict[str, Any]:
    line: dict[str, Any] = {
        "kind": "event",
        "position": record.position,
        "id": record.originator_id,
        "version": record.version,
        "topic": record.topic,
    }
    try:
        line["state"] = record.state.decode("utf-8")
    except UnicodeDecodeError:
        line["stateBase64"] = base64.b64encode(record.state).decode("ascii")
        return line
    try:
        state = parse_state(record.state)
    except ValueError:
        return line
    timestamp = state.get("timestamp")
    if isinstance(timestamp, dict):
        timestamp = timestamp.get("_data_")
    line["type"] = record.topic.rpartition(":")[2].removeprefix("Job")
    line["timestamp"] = timestamp
    line["digest"] = state.get("digest", "")
    line["prevDigest"] = state.get("prev_digest", "")
    return line


def header(stretch: Stretch, exported_at: str) -> dict[str, Any]:
    return {
        "kind": "header",
        "format": FORMAT,
        "exportedAt": exported_at,
        "after": stretch.anchor.position if stretch.anchor else 0,
        "upto": stretch.upto,
    }


async def export_lines(
    log: AuditLog, checkpoints: CheckpointStore, since: Bound, until: Bound, exported_at: str
) -> AsyncIterator[str]:
    stretch = choose_stretch(await all_checkpoints(checkpoints), since, until)
    yield json.dumps(header(stretch, exported_at))
    if stretch.anchor is not None:
        yield json.dumps({"kind": "anchor", **stretch.anchor.to_json()})
    start = stretch.anchor.position if stretch.anchor else 0
    async for record in records_between(log, start, stretch.upto):
        yield json.dumps(event_line(record), ensure_ascii=False)
    for checkpoint in stretch.checkpoints:
        yield json.dumps({"kind": "checkpoint", **checkpoint.to_json()})


@dataclass(slots=True)
class ExportBundle:
    """The lines of a bundle of the log between two bounds (see ``choose_stretch``), for
    an auditor to verify offline."""

    log: AuditLog
    checkpoints: CheckpointStore

    def __call__(self, since: Bound, until: Bound, exported_at: str) -> AsyncIterator[str]:
        return export_lines(self.log, self.checkpoints, since, until, exported_at)


@dataclass(slots=True)
class Bundle:
    anchor: Checkpoint | None
    records: list[Record]
    checkpoints: list[Checkpoint]


EventLineDecoder = Callable[[str], Record]
"""Decodes one event line (a faster decoder may be given: ``adapters.audit.bundle_lines``);
raises ``ValueError``, ``KeyError`` or ``TypeError`` on a line that is not one."""

_EVENT_PREFIX = '{"kind": "event"'


def event_record(line: Mapping[str, Any]) -> Record:
    """The record an event line holds (its reader fields aside)."""
    if line.get("state") is not None:
        state = str(line["state"]).encode("utf-8")
    elif line.get("stateBase64") is not None:
        state = base64.b64decode(str(line["stateBase64"]))
    else:
        raise ValueError("an event line without its state")
    return Record(
        int(line["position"]), str(line["id"]), int(line["version"]), str(line["topic"]), state
    )


def decode_event_line(text: str) -> Record:
    """The standard library's decoder of an event line."""
    line = json.loads(text)
    if not isinstance(line, dict):
        raise TypeError("an event line is a JSON object")
    return event_record(line)


def read_bundle(
    lines: Iterable[str], *, decode_event: EventLineDecoder = decode_event_line
) -> Bundle:
    items: Iterator[str] = (line for line in lines if line.strip())
    try:
        first = json.loads(next(items))
    except (StopIteration, ValueError):
        raise BundleError("the bundle is empty or its first line is not JSON") from None
    if not isinstance(first, dict) or first.get("format") != FORMAT:
        raise BundleError(f"not an audit bundle ({FORMAT})")
    bundle = Bundle(None, [], [])
    records = bundle.records
    for number, text in enumerate(items, start=2):
        try:
            # Event lines, nearly all of a bundle, are decoded straight into their fields.
            if text.startswith(_EVENT_PREFIX):
                records.append(decode_event(text))
                continue
            line = json.loads(text)
            kind = line["kind"]
            if kind == "event":
                records.append(event_record(line))
            elif kind == "checkpoint":
                bundle.checkpoints.append(Checkpoint.from_json(line))
            elif kind == "anchor":
                bundle.anchor = Checkpoint.from_json(line)
        except (ValueError, KeyError, TypeError):
            raise BundleError(f"line {number} of the bundle is not a valid entry") from None
    return bundle


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8") as file:
        for number, text in enumerate(file, start=1):
            if text.strip():
                yield number, text


Progress = Callable[[int, int], None]
"""Told ``(records verified, position)`` every ``PROGRESS_EVERY`` records."""
PROGRESS_EVERY = 50_000


def verify_bundle_file(
    path: Path,
    keys: CheckpointKeys,
    *,
    progress: Progress | None = None,
    decode_event: EventLineDecoder = decode_event_line,
) -> VerifyReport:
    """Verifies the bundle at ``path`` reading it twice side by side, its events on one pass
    and its checkpoints (at its end) on another as the events reach them: memory stays flat
    whatever the bundle's size."""
    lines = _lines(path)
    try:
        first = json.loads(next(lines)[1])
    except (StopIteration, ValueError):
        raise BundleError("the bundle is empty or its first line is not JSON") from None
    if not isinstance(first, dict) or first.get("format") != FORMAT:
        raise BundleError(f"not an audit bundle ({FORMAT})")
    anchor = None
    for number, text in _lines(path):
        if number > 1 and not text.startswith(_EVENT_PREFIX):
            line = _other_line(number, text)
            if line.get("kind") == "anchor":
                anchor = Checkpoint.from_json(line)
        if number > 2:
            break

    def checkpoints() -> Iterator[Checkpoint]:
        for number, text in _lines(path):
            if number > 1 and not text.startswith(_EVENT_PREFIX):
                line = _other_line(number, text)
                if line.get("kind") == "checkpoint":
                    yield Checkpoint.from_json(line)

    verifier = ChainVerifier(keys, checkpoints(), anchor=anchor)
    fed = 0
    for number, text in lines:
        if text.startswith(_EVENT_PREFIX):
            try:
                record = decode_event(text)
            except (ValueError, KeyError, TypeError):
                raise BundleError(f"line {number} of the bundle is not a valid entry") from None
            verifier.feed(record)
            fed += 1
            if progress is not None and fed % PROGRESS_EVERY == 0:
                progress(fed, record.position)
    return verifier.finish()


def _other_line(number: int, text: str) -> dict[str, Any]:
    try:
        line = json.loads(text)
        if not isinstance(line, dict) or not isinstance(line.get("kind"), str):
            raise ValueError("no kind")
        if line["kind"] in ("checkpoint", "anchor"):
            Checkpoint.from_json(line)
        return line
    except (ValueError, KeyError, TypeError):
        raise BundleError(f"line {number} of the bundle is not a valid entry") from None


class Extends:
    """Whether a newer log extends an older bundle: every record the old bundle holds is in the
    new log at the same position with the same job, version, topic and stored bytes, and every
    checkpoint it holds (its anchor included) is among the new checkpoints, unchanged. Feed the
    new log's records in position order, then ``finish`` with its checkpoints; the first
    difference is named (what a rollback or a rewrite of what was exported looks like)."""

    def __init__(self, old: Bundle) -> None:
        self._old = {r.position: r for r in old.records}
        self._old_checkpoints = [*([old.anchor] if old.anchor else []), *old.checkpoints]
        self._first: Break | None = None
        self._last_new = 0
        self._seen: set[int] = set()

    def feed(self, record: Record) -> None:
        self._last_new = max(self._last_new, record.position)
        held = self._old.get(record.position)
        if held is None:
            return
        self._seen.add(record.position)
        if self._first is None and (
            (held.originator_id, held.version, held.topic, held.state)
            != (record.originator_id, record.version, record.topic, record.state)
        ):
            self._first = Break(
                BreakKind.CHANGED,
                f"the old bundle holds job {held.originator_id} version {held.version} here; "
                "the new log holds something else: what was exported was rewritten",
                job=record.originator_id,
                version=record.version,
                position=record.position,
            )

    def finish(self, checkpoints: Iterable[Checkpoint]) -> list[Break]:
        if self._first is not None:
            return [self._first]
        missing = self._old.keys() - self._seen
        if missing:
            gone = min(missing)
            held = self._old[gone]
            return [
                Break(
                    BreakKind.MISSING,
                    f"the old bundle holds job {held.originator_id} version {held.version} "
                    f"here; the new log does not (it ends at position {self._last_new}): "
                    f"records after position {gone - 1} were removed or rewritten",
                    job=held.originator_id,
                    version=held.version,
                    position=gone,
                )
            ]
        new = {c.position: c for c in checkpoints}
        for kept in self._old_checkpoints:
            found = new.get(kept.position)
            if found is None:
                return [
                    Break(
                        BreakKind.MISSING,
                        f"the old bundle's checkpoint at position {kept.position} (recorded "
                        f"{kept.recorded_at}) is missing from the new log: records after "
                        f"position {kept.position} may have been removed or rewritten",
                        position=kept.position,
                    )
                ]
            if found.to_json(with_heads=False) != kept.to_json(with_heads=False):
                return [
                    Break(
                        BreakKind.CHANGED,
                        f"the checkpoint at position {kept.position} differs from the one in "
                        "the old bundle",
                        position=kept.position,
                    )
                ]
        return []


def _against(report: VerifyReport, extends: Extends | None, checkpoints: list[Checkpoint]) -> None:
    if extends is not None:
        report.breaks[:0] = extends.finish(checkpoints)


def _witnessed(
    stored: list[Checkpoint], witnessed: list[Checkpoint] | None
) -> tuple[list[Break], list[Checkpoint]]:
    if witnessed is None:
        return [], stored
    breaks, extra = compare_witnesses(stored, witnessed)
    return breaks, [*stored, *extra]


def _finish(
    report: VerifyReport,
    witness_breaks: list[Break],
    witnessed: list[Checkpoint] | None,
    extends: Extends | None,
    checkpoints: list[Checkpoint],
) -> VerifyReport:
    if witnessed is not None:
        report.witnesses = len(witnessed)
    _against(report, extends, checkpoints)
    report.breaks[:0] = witness_breaks
    return report


def verify_bundle(
    bundle: Bundle,
    keys: CheckpointKeys,
    *,
    against: Bundle | None = None,
    witnessed: list[Checkpoint] | None = None,
) -> VerifyReport:
    """Verifies ``bundle`` offline; with ``against``, also that it extends that older one;
    with ``witnessed``, against those checkpoints too (those past the bundle's end aside)."""
    upto = bundle.records[-1].position if bundle.records else 0
    start = bundle.anchor.position if bundle.anchor else 0
    inside = None if witnessed is None else [w for w in witnessed if start < w.position <= upto]
    witness_breaks, checkpoints = _witnessed(bundle.checkpoints, inside)
    verifier = ChainVerifier(keys, checkpoints, anchor=bundle.anchor)
    extends = Extends(against) if against is not None else None
    for record in bundle.records:
        verifier.feed(record)
        if extends is not None:
            extends.feed(record)
    held = [*([bundle.anchor] if bundle.anchor else []), *bundle.checkpoints]
    return _finish(verifier.finish(), witness_breaks, inside, extends, held)


CHECKPOINT_PAGE = 100


async def verify_store(
    log: AuditLog,
    checkpoints: CheckpointStore,
    keys: CheckpointKeys,
    *,
    against: Bundle | None = None,
    witnessed: list[Checkpoint] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Verifies the store; with ``against``, also that it extends that older bundle; with
    ``witnessed``, against the checkpoints kept outside the database too. Without either, the
    checkpoints are read a page at a time as the records reach them (memory stays flat)."""
    if against is None and witnessed is None:
        return await _verify_store_streamed(log, checkpoints, keys, progress)
    kept = await all_checkpoints(checkpoints)
    witness_breaks, to_check = _witnessed(kept, witnessed)
    verifier = ChainVerifier(keys, to_check)
    extends = Extends(against) if against is not None else None
    fed = 0
    async for record in records_between(log, 0, None):
        verifier.feed(record)
        if extends is not None:
            extends.feed(record)
        fed += 1
        if progress is not None and fed % PROGRESS_EVERY == 0:
            progress(fed, record.position)
    return _finish(verifier.finish(), witness_breaks, witnessed, extends, kept)


async def _verify_store_streamed(
    log: AuditLog, checkpoints: CheckpointStore, keys: CheckpointKeys, progress: Progress | None
) -> VerifyReport:
    verifier = ChainVerifier(keys, [])
    loaded, exhausted, fed = 0, False, 0
    async for record in records_between(log, 0, None):
        # The checkpoints up to (and one page past) this record, before it is fed.
        while not exhausted and loaded < record.position:
            page = await checkpoints.page(loaded, CHECKPOINT_PAGE)
            verifier.add_checkpoints(page)
            exhausted = len(page) < CHECKPOINT_PAGE
            loaded = page[-1].position if page else loaded
        verifier.feed(record)
        fed += 1
        if progress is not None and fed % PROGRESS_EVERY == 0:
            progress(fed, record.position)
    while not exhausted:
        page = await checkpoints.page(loaded, CHECKPOINT_PAGE)
        verifier.add_checkpoints(page)
        exhausted = len(page) < CHECKPOINT_PAGE
        loaded = page[-1].position if page else loaded
    return verifier.finish()
