"""Witnessing checkpoints: each written once, at least once (a storage outage is retried on the
next pass), a conflict left as it was and logged; what the witnesses say about a store."""

from __future__ import annotations

import dataclasses
import logging

from adapters.audit.checkpoints import InMemoryCheckpointStore
from adapters.eventstore.store import EventsourcingJobEventStore
from adapters.memory.result_storage import InMemoryResultStorage
from application.audit.verify import BreakKind
from application.audit.witness import (
    WitnessCheckpoints,
    compare_witnesses,
    read_witness,
    record_then_witness,
    witness_body,
    witness_key,
)
from domain.audit_chain import Checkpoint


def _checkpoint(position: int, root: str = "ab" * 32) -> Checkpoint:
    return Checkpoint(
        position=position, count=position, root=root, key_id="1.abc",
        recorded_at=f"2026-12-05T10:00:{position:02d}Z", heads={"job": (1, "cd" * 32)},
        signature="c2ln",
    )  # fmt: skip


async def _setup(*positions: int) -> tuple[WitnessCheckpoints, InMemoryResultStorage]:
    checkpoints = InMemoryCheckpointStore()
    for position in positions:
        await checkpoints.add(_checkpoint(position))
    storage = InMemoryResultStorage(key_prefix="pre/")
    store = EventsourcingJobEventStore.in_memory()
    return WitnessCheckpoints(checkpoints, storage, store, batch=2), storage


async def test_each_checkpoint_is_witnessed_once_without_its_heads() -> None:
    witness, storage = await _setup(3, 6, 9)
    assert await witness() == 3
    assert await witness() == 0
    keys = sorted(storage.objects)
    assert keys == [f"pre/audit/checkpoints/{p:020d}.json" for p in (3, 6, 9)]
    kept = read_witness(storage.objects[keys[0]])
    assert kept.heads is None and b"job" not in storage.objects[keys[0]]
    assert kept.to_json(with_heads=False) == _checkpoint(3).to_json(with_heads=False)
    await witness.checkpoints.add(_checkpoint(12))
    assert await witness() == 1


async def test_an_outage_is_retried_on_the_next_pass_and_nothing_skipped(caplog) -> None:
    witness, storage = await _setup(3, 6)
    recorded = 0

    async def record() -> int:
        nonlocal recorded
        recorded += 1
        return 1

    audit = record_then_witness(record, witness)
    storage.unavailable = True
    with caplog.at_level(logging.WARNING):
        assert await audit() == 1
    assert storage.objects == {} and "audit.witness.failed" in caplog.text
    storage.unavailable = False
    await audit()
    assert len(storage.objects) == 2 and recorded == 2


async def test_a_conflicting_witness_stays_as_it_was_and_is_logged(caplog) -> None:
    witness, storage = await _setup(3)
    original = _checkpoint(3, root="ff" * 32)
    await storage.keep(witness_key(original), witness_body(original))
    with caplog.at_level(logging.ERROR):
        assert await witness() == 1
    assert "audit.witness.conflict" in caplog.text
    assert read_witness(storage.objects[f"pre/{witness_key(original)}"]).root == "ff" * 32


def test_the_witnesses_name_a_rollback_and_a_rewrite() -> None:
    stored = [_checkpoint(3), _checkpoint(6, root="00" * 32)]
    witnessed = [_checkpoint(3), _checkpoint(6), _checkpoint(9)]
    breaks, to_check = compare_witnesses(stored, witnessed)
    assert [(b.kind, b.position) for b in breaks] == [
        (BreakKind.CHANGED, 6),
        (BreakKind.MISSING, 9),
    ]
    assert "records after position 6 were removed or rewritten" in breaks[1].detail
    assert [c.position for c in to_check] == [6, 9]
    assert compare_witnesses(stored[:1], witnessed[:1]) == ([], [])
    same = dataclasses.replace(_checkpoint(3), heads=None, heads_sha256=_checkpoint(3).heads_sha256)
    assert compare_witnesses(stored[:1], [same]) == ([], [])


async def test_checkpoints_are_published_once_each_and_a_refusal_retried() -> None:
    from adapters.memory.messaging import RecordingJobEventPublisher
    from application.audit.witness import PublishCheckpoints

    checkpoints = InMemoryCheckpointStore()
    for position in (3, 6):
        await checkpoints.add(_checkpoint(position))
    publisher = RecordingJobEventPublisher()
    publish = PublishCheckpoints(checkpoints, publisher, EventsourcingJobEventStore.in_memory())

    async def record() -> int:
        return 0

    audit = record_then_witness(record, None, publish)
    publisher.fail_next(1)
    await audit()  # refused: nothing recorded as published
    assert publisher.checkpoints == []
    await audit()
    await audit()
    assert [c.position for c in publisher.checkpoints] == [3, 6]
