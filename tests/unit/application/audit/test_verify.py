"""Verifying chains and checkpoints: an untouched log passes; each kind of tampering is named
(job, version, kind)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from uuid import UUID

import pytest

from adapters.audit.checkpoints import InMemoryCheckpointStore
from adapters.crypto.audit_signing import AuditKeys, Ed25519CheckpointKeys
from adapters.crypto.keys import KeyRing, generate_master_key
from adapters.eventstore.store import EventsourcingJobEventStore
from application.audit.checkpointer import RecordCheckpoints
from application.audit.verify import BreakKind, ChainVerifier, VerifyReport
from domain import job as jobs
from domain.audit_chain import Checkpoint, Record, link, parse_state, split_linked
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT
from tests.support.twins import FakeClock

KEYS = AuditKeys.from_ring(KeyRing(generate_master_key()))


def _request() -> ExtractionRequest:
    return ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "payments"})


async def _run_jobs(store: EventsourcingJobEventStore, clock: FakeClock, n: int) -> list[UUID]:
    ids = [UUID(int=i + 1) for i in range(n)]
    for job_id in ids:
        await store.append(
            [jobs.request_job(job_id, _request(), clock.now(), tenant=SINGLE_TENANT)]
        )
    for job_id in ids:
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        await store.append([jobs.claim(job, "w1", clock.now(), timedelta(minutes=1))])
        job = jobs.fold(await store.job_events(job_id))
        assert job is not None
        await store.append([jobs.fail(job, "boom", clock.now(), "w1")])
    return ids


@dataclasses.dataclass
class Trail:
    records: list[Record]
    checkpoints: list[Checkpoint]
    ids: list[UUID]


@pytest.fixture
async def trail() -> AsyncIterator[Trail]:
    store = EventsourcingJobEventStore.in_memory()
    clock = FakeClock()
    cps = InMemoryCheckpointStore()
    recorder = RecordCheckpoints(store, cps, KEYS.signer, clock, every_records=4)
    ids = await _run_jobs(store, clock, 5)
    await recorder()
    records = await store.read_records(0, 1000)
    yield Trail(records, await cps.page(0, 100), ids)
    await store.close()


def _verify(records: list[Record], checkpoints: list[Checkpoint]) -> VerifyReport:
    verifier = ChainVerifier(KEYS.keys, checkpoints)
    verifier.feed_all(records)
    return verifier.finish()


def _first(report: VerifyReport) -> tuple[BreakKind, str | None, int | None]:
    assert not report.ok
    b = report.breaks[0]
    return b.kind, b.job, b.version


def _where(trail: Trail, job: int, version: int) -> int:
    job_id = str(trail.ids[job])
    return next(
        i for i, r in enumerate(trail.records) if r.originator_id == job_id and r.version == version
    )


async def test_an_untouched_log_verifies(trail: Trail) -> None:
    report = _verify(trail.records, trail.checkpoints)
    assert report.ok, report.summary()
    assert report.job_events == 15 and report.jobs == 5
    assert report.checkpoints == 3 and report.uncovered == 3
    assert report.unchained == 0


async def test_an_altered_fact_is_changed(trail: Trail) -> None:
    i = _where(trail, 1, 2)
    record = trail.records[i]
    trail.records[i] = dataclasses.replace(record, state=record.state.replace(b'"w1"', b'"w9"'))
    assert _first(_verify(trail.records, trail.checkpoints)) == (
        BreakKind.CHANGED,
        str(trail.ids[1]),
        2,
    )


async def test_a_deleted_event_is_missing(trail: Trail) -> None:
    del trail.records[_where(trail, 2, 2)]
    assert _first(_verify(trail.records, trail.checkpoints)) == (
        BreakKind.MISSING,
        str(trail.ids[2]),
        2,
    )


async def test_two_swapped_events_are_reordered(trail: Trail) -> None:
    a, b = _where(trail, 3, 2), _where(trail, 3, 3)
    ra, rb = trail.records[a], trail.records[b]
    trail.records[a] = dataclasses.replace(ra, topic=rb.topic, state=rb.state)
    trail.records[b] = dataclasses.replace(rb, topic=ra.topic, state=ra.state)
    assert _first(_verify(trail.records, trail.checkpoints)) == (
        BreakKind.REORDERED,
        str(trail.ids[3]),
        2,
    )


async def test_a_deleted_job_is_missing(trail: Trail) -> None:
    gone = str(trail.ids[0])
    records = [r for r in trail.records if r.originator_id != gone]
    assert _first(_verify(records, trail.checkpoints)) == (BreakKind.MISSING, gone, 1)


async def test_a_truncated_tail_is_missing(trail: Trail) -> None:
    last = trail.checkpoints[-1].position
    records = [r for r in trail.records if r.position < last - 1]
    kind, job, _ = _first(_verify(records, trail.checkpoints))
    assert kind is BreakKind.MISSING and job is not None


async def test_a_replaced_signature_is_bad(trail: Trail) -> None:
    other = trail.checkpoints[0].signature
    trail.checkpoints[1] = dataclasses.replace(trail.checkpoints[1], signature=other)
    report = _verify(trail.records, trail.checkpoints)
    assert report.breaks[0].kind is BreakKind.BAD_SIGNATURE
    assert report.breaks[0].position == trail.checkpoints[1].position


async def test_a_checkpoint_without_signature_or_known_key_is_unsigned(trail: Trail) -> None:
    trail.checkpoints[0] = dataclasses.replace(trail.checkpoints[0], signature="")
    assert _verify(trail.records, trail.checkpoints).breaks[0].kind is BreakKind.UNSIGNED
    stranger = AuditKeys.from_ring(KeyRing(generate_master_key()))
    verifier = ChainVerifier(stranger.keys, trail.checkpoints[1:])
    verifier.feed_all(trail.records)
    assert verifier.finish().breaks[0].kind is BreakKind.UNSIGNED


async def test_a_recomputed_chain_still_breaks_the_checkpoint(trail: Trail) -> None:
    """Whoever rewrites an event and its digest cannot re-sign the checkpoint."""
    i = _where(trail, 4, 1)
    record = trail.records[i]
    state = parse_state(record.state)
    state["request"]["metadata"]["source"] = "forged"
    del state["prev_digest"], state["digest"]
    raw = json.dumps(state).encode()
    forged, _ = link(record.originator_id, 1, record.topic, raw, "")
    trail.records[i] = dataclasses.replace(record, state=forged)
    assert _first(_verify(trail.records, trail.checkpoints)) == (
        BreakKind.CHANGED,
        str(trail.ids[4]),
        1,
    )


async def test_offline_keys_match_checkpoints_by_fingerprint(trail: Trail) -> None:
    offline = Ed25519CheckpointKeys.of_public([KEYS.signer.public_key])
    verifier = ChainVerifier(offline, trail.checkpoints)
    verifier.feed_all(trail.records)
    assert verifier.finish().ok


async def test_checkpoints_survive_key_rotation(trail: Trail) -> None:
    old = generate_master_key()
    first = AuditKeys.from_ring(KeyRing(old, "1"))
    rotated = AuditKeys.from_ring(KeyRing(generate_master_key(), "2", {"1": old}))
    assert first.signer.key_id in rotated.keys.key_ids()
    message = b"m"
    signature = first.signer.sign(message)
    assert rotated.keys.check(first.signer.key_id, message, signature).value == "valid"


class _Log:
    def __init__(self, records: list[Record]) -> None:
        self.records = records

    async def read_records(self, after: int, limit: int) -> list[Record]:
        return [r for r in self.records if r.position > after][:limit]

    async def last_notification_id(self) -> int:
        return self.records[-1].position


async def test_an_unchained_event_after_chaining_began_is_reported_not_a_break(
    trail: Trail,
) -> None:
    """A process of the version before chaining, still running during a rolling upgrade."""
    i = _where(trail, 4, 3)
    record = trail.records[i]
    state = parse_state(record.state)
    del state["prev_digest"], state["digest"]
    trail.records[i] = dataclasses.replace(record, state=json.dumps(state).encode())
    checkpoints = InMemoryCheckpointStore()
    clock = FakeClock()
    recorder = RecordCheckpoints(_Log(trail.records), checkpoints, KEYS.signer, clock)
    await recorder()
    clock.advance(minutes=2)
    await recorder()
    report = _verify(trail.records, await checkpoints.page(0, 10))
    assert report.ok, report.summary()
    assert report.unchained_later == 1 and report.first_unchained_later == record.position
    assert f"the first at position {record.position}" in report.summary()


def _at(trail: Trail, position: int) -> Record:
    [record] = [r for r in trail.records if r.position == position]
    return record


def _breaks(report: VerifyReport) -> list[tuple[BreakKind, str | None, int | None, int | None]]:
    return [(b.kind, b.job, b.version, b.position) for b in report.breaks]


def _relinked(record: Record, version: int, prev: str, topic: str | None = None) -> Record:
    """``record`` as a forger would write it: its content kept, linked to ``prev`` and its own
    digest recomputed, as ``version`` (and ``topic``)."""
    state = parse_state(record.state)
    del state["prev_digest"], state["digest"]
    topic = topic or record.topic
    raw = json.dumps(state).encode()
    forged, _ = link(record.originator_id, version, topic, raw, prev)
    return dataclasses.replace(record, version=version, topic=topic, state=forged)


async def test_a_record_inserted_before_a_checkpoint_is_named_at_the_forged_job(
    trail: Trail,
) -> None:
    """A correctly chained fourth event added to a failed job, the records after it moved up
    one position: the break names the forged job, version and position first."""
    failed = _at(trail, 7)  # job 0's last event (version 3)
    assert failed.originator_id == str(trail.ids[0]) and failed.version == 3
    _, digest = split_linked(failed.state)
    assert digest is not None
    forged = dataclasses.replace(_relinked(failed, 4, digest), position=8)
    records = [r if r.position <= 7 else dataclasses.replace(r, position=r.position + 1)
               for r in trail.records]  # fmt: skip
    records.insert(7, forged)
    report = _verify(records, trail.checkpoints)
    assert _breaks(report)[0] == (BreakKind.CHANGED, str(trail.ids[0]), 4, 8)
    assert "a record was inserted" in report.breaks[0].detail
    # The job whose event was pushed past the checkpoint is named after it, as moved.
    assert (BreakKind.MISSING, str(trail.ids[1]), 2, None) in _breaks(report)


# After the last checkpoint only the chain protects the records: each tamper below must be
# caught by the digests and links alone (the trail's last checkpoint is at position 12).


async def test_after_the_last_checkpoint_a_changed_topic_is_changed(trail: Trail) -> None:
    assert trail.checkpoints[-1].position == 12
    record = _at(trail, 14)
    other = _at(trail, 15).topic
    assert other != record.topic
    trail.records[13] = dataclasses.replace(record, topic=other)
    assert _breaks(_verify(trail.records, trail.checkpoints)) == [
        (BreakKind.CHANGED, str(trail.ids[4]), 2, 14)
    ]


async def test_after_the_last_checkpoint_a_changed_version_is_named(trail: Trail) -> None:
    record = _at(trail, 15)
    trail.records[14] = dataclasses.replace(record, version=4)
    assert _breaks(_verify(trail.records, trail.checkpoints)) == [
        (BreakKind.REORDERED, str(trail.ids[4]), 4, 15),
        (BreakKind.MISSING, str(trail.ids[4]), 3, 15),
    ]


async def test_after_the_last_checkpoint_a_relinked_event_breaks_the_chain(trail: Trail) -> None:
    """The forger recomputes the event's own digest; its link to the job's previous event no
    longer holds."""
    trail.records[14] = _relinked(_at(trail, 15), 3, "ab" * 32)
    assert _breaks(_verify(trail.records, trail.checkpoints)) == [
        (BreakKind.CHANGED, str(trail.ids[4]), 2, 15)
    ]


async def test_after_the_last_checkpoint_a_first_event_linked_to_a_predecessor_is_changed(
    trail: Trail,
) -> None:
    job = str(trail.ids[4])
    first = next(r for r in trail.records if r.originator_id == job and r.version == 1)
    moved = dataclasses.replace(_relinked(first, 1, "cd" * 32), position=16)
    records = [r for r in trail.records if r.originator_id != job] + [
        dataclasses.replace(r, position=16 + r.version) if r.version > 1 else moved
        for r in trail.records
        if r.originator_id == job
    ]
    # Job 4 now lives after the last checkpoint only; the checkpoints still name it, so drop
    # its heads from the comparison by verifying against none of them past position 4.
    report = _verify(records, [c for c in trail.checkpoints if c.position < 5])
    assert (BreakKind.CHANGED, job, 1, 16) in _breaks(report)


async def test_a_bundle_verified_from_its_file_as_it_streams_matches_the_whole_read(
    trail: Trail, tmp_path
) -> None:
    from application.audit.bundle import event_line, read_bundle, verify_bundle, verify_bundle_file

    def write(records: list[Record]) -> Path:
        path = tmp_path / f"bundle-{len(list(tmp_path.iterdir()))}.jsonl"
        lines = [json.dumps({"kind": "header", "format": "fetcher-audit-bundle-v1"})]
        lines += [json.dumps(event_line(r), ensure_ascii=False) for r in records]
        lines += [json.dumps({"kind": "checkpoint", **c.to_json()}) for c in trail.checkpoints]
        path.write_text("\n".join(lines) + "\n")
        return path

    clean = write(trail.records)
    streamed = verify_bundle_file(clean, KEYS.keys)
    assert streamed.ok and streamed.checkpoints == 3 and streamed.records == 15
    changed = list(trail.records)
    changed[5] = dataclasses.replace(changed[5], state=changed[5].state.replace(b"w1", b"w9"))
    tampered = write(changed)
    whole = verify_bundle(read_bundle(tampered.read_text().splitlines()), KEYS.keys)
    assert verify_bundle_file(tampered, KEYS.keys).to_json() == whole.to_json()
    assert not whole.ok
