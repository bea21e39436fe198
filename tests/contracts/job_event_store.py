"""One contract for every ``JobEventStore``: the in-memory twin (unit suite), the eventsourcing
adapter in process, on SQLite and on PostgreSQL (integration suite).

A subclass provides a ``store`` fixture yielding a fresh, empty store.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from application.ports.job_event_store import JobEventStore
from domain.dedup import RequestSlotTaken, slot_id
from domain.errors import ConcurrencyConflict, Unavailable
from domain.job import (
    JobClaimed,
    JobCompleted,
    JobEvent,
    JobFailed,
    JobRequested,
    JobResultStored,
    request_job,
)
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT

T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _request() -> ExtractionRequest:
    return ExtractionRequest.create(
        {"billing": {"public.invoices": ["id", "amount"], "ledger": ["*"]}},
        {"billing": {"public.invoices": {"amount": {"gte": [10], "in": [1, 2.5, "x"]}}}},
        {"source": "Billing-App", "nested": {"k": [True, None]}},
    )


def _requested(job_id: UUID | None = None, at: datetime = T0) -> JobRequested:
    return request_job(job_id or uuid4(), _request(), at, tenant=SINGLE_TENANT)


def _full_history(job_id: UUID) -> list[JobEvent]:
    return [
        _requested(job_id),
        JobClaimed(
            originator_id=job_id,
            originator_version=2,
            timestamp=T0 + timedelta(seconds=1),
            worker_id="worker-1",
            lease_until=T0 + timedelta(minutes=5),
            attempt=1,
        ),
        JobResultStored(
            originator_id=job_id,
            originator_version=3,
            timestamp=T0 + timedelta(seconds=2),
            worker_id="worker-1",
            path="results/2025/03/job.json.enc",
            size_bytes=12345,
            row_count=42,
            hmac="ab" * 32,
        ),
        JobCompleted(
            originator_id=job_id,
            originator_version=4,
            timestamp=T0 + timedelta(seconds=3),
            worker_id="worker-1",
            execution_time_ms=3000,
        ),
    ]


def _failed_history(job_id: UUID) -> list[JobEvent]:
    return [
        _requested(job_id),
        JobFailed(
            originator_id=job_id,
            originator_version=2,
            timestamp=T0 + timedelta(seconds=1),
            error="datasource 'billing' is unreachable",
            worker_id="",
        ),
    ]


def _slot_taken(slot: UUID, version: int, job_id: UUID) -> RequestSlotTaken:
    return RequestSlotTaken(
        originator_id=slot, originator_version=version, timestamp=T0, job_id=job_id
    )


class JobEventStoreContract:
    """Subclasses provide a ``store`` fixture yielding a fresh, empty store."""

    async def test_every_job_event_type_round_trips_with_all_fields(
        self, store: JobEventStore
    ) -> None:
        done, failed = uuid4(), uuid4()
        await store.append(_full_history(done))
        await store.append(_failed_history(failed))

        assert await store.job_events(done) == _full_history(done)
        assert await store.job_events(failed) == _failed_history(failed)
        restored = (await store.job_events(done))[0]
        assert isinstance(restored, JobRequested)
        assert restored.request == _request().to_dict()
        assert restored.timestamp.tzinfo is not None

    async def test_slot_events_round_trip_in_version_order(self, store: JobEventStore) -> None:
        slot, first, second = slot_id("hash-1", tenant=SINGLE_TENANT), uuid4(), uuid4()
        await store.append([_requested(first), _slot_taken(slot, 1, first)])
        await store.append([_requested(second), _slot_taken(slot, 2, second)])

        assert await store.slot_events(slot) == [
            _slot_taken(slot, 1, first),
            _slot_taken(slot, 2, second),
        ]
        assert await store.slot_events(slot_id("other", tenant=SINGLE_TENANT)) == []
        assert await store.job_events(uuid4()) == []

    async def test_append_returns_notification_id_of_last_event(self, store: JobEventStore) -> None:
        last = await store.append(_full_history(uuid4()))
        log = await store.read_log(0, 100)
        assert last == log[-1].notification_id
        assert len(log) == 4

    async def test_append_of_two_aggregates_is_all_or_nothing(self, store: JobEventStore) -> None:
        slot, winner, loser = slot_id("same-request", tenant=SINGLE_TENANT), uuid4(), uuid4()
        await store.append([_requested(winner), _slot_taken(slot, 1, winner)])

        with pytest.raises(ConcurrencyConflict):
            await store.append([_requested(loser), _slot_taken(slot, 1, loser)])

        assert await store.job_events(loser) == []
        assert await store.slot_events(slot) == [_slot_taken(slot, 1, winner)]
        assert [e.event.originator_id for e in await store.read_log(0, 100)] == [winner, slot]

    async def test_duplicate_versions_within_one_append_conflict(
        self, store: JobEventStore
    ) -> None:
        job = uuid4()
        with pytest.raises(ConcurrencyConflict):
            await store.append([_requested(job), _requested(job)])
        assert await store.job_events(job) == []

    async def test_concurrent_first_appends_have_exactly_one_winner(
        self, store: JobEventStore
    ) -> None:
        job = uuid4()
        attempts = [
            store.append([_requested(job, T0 + timedelta(microseconds=i))]) for i in range(20)
        ]
        results = await asyncio.gather(*attempts, return_exceptions=True)

        wins = [r for r in results if isinstance(r, int)]
        conflicts = [r for r in results if isinstance(r, ConcurrencyConflict)]
        assert (len(wins), len(conflicts)) == (1, 19), results
        assert len(await store.job_events(job)) == 1
        assert [e.notification_id for e in await store.read_log(0, 100)] == wins

    async def test_concurrent_appends_each_return_their_own_last_notification_id(
        self, store: JobEventStore
    ) -> None:
        jobs = [uuid4() for _ in range(12)]
        returned = await asyncio.gather(*(store.append(_full_history(job)) for job in jobs))

        log = await store.read_log(0, 100)
        assert len(log) == 4 * len(jobs)
        for job, last in zip(jobs, returned, strict=True):
            own = [e.notification_id for e in log if e.event.originator_id == job]
            assert last == max(own)
            assert await store.job_events(job) == _full_history(job)

    async def test_a_conflicting_append_among_concurrent_ones_fails_alone(
        self, store: JobEventStore
    ) -> None:
        slot, holder, loser = slot_id("contested", tenant=SINGLE_TENANT), uuid4(), uuid4()
        await store.append([_requested(holder), _slot_taken(slot, 1, holder)])
        others = [uuid4() for _ in range(8)]
        attempts = [store.append(_full_history(job)) for job in others[:4]]
        attempts.append(store.append([_requested(loser), _slot_taken(slot, 1, loser)]))
        attempts += [store.append(_full_history(job)) for job in others[4:]]

        results = await asyncio.gather(*attempts, return_exceptions=True)

        assert isinstance(results[4], ConcurrencyConflict), results
        assert all(isinstance(r, int) for i, r in enumerate(results) if i != 4), results
        assert await store.job_events(loser) == []
        assert await store.slot_events(slot) == [_slot_taken(slot, 1, holder)]
        for job in others:
            assert await store.job_events(job) == _full_history(job)
        assert len(await store.read_log(0, 100)) == 2 + 4 * len(others)

    async def test_read_log_returns_events_after_position_in_order(
        self, store: JobEventStore
    ) -> None:
        jobs = [uuid4() for _ in range(5)]
        for job in jobs:
            await store.append([_requested(job)])

        log = await store.read_log(0, 100)
        ids = [e.notification_id for e in log]
        assert [e.event.originator_id for e in log] == jobs
        assert ids == sorted(set(ids))

        after_second = await store.read_log(ids[1], 100)
        assert [e.event.originator_id for e in after_second] == jobs[2:]
        assert [e.notification_id for e in await store.read_log(ids[1], 2)] == ids[2:4]
        assert await store.read_log(ids[-1], 100) == []
        assert await store.read_log(0, 0) == []

    async def test_last_notification_id_is_the_newest_event_in_the_log(
        self, store: JobEventStore
    ) -> None:
        assert await store.last_notification_id() == 0
        await store.append([_requested()])
        last = await store.append(_full_history(uuid4()))
        assert await store.last_notification_id() == last
        assert (await store.read_log(0, 100))[-1].notification_id == last

    async def test_a_tailing_reader_sees_every_event_exactly_once(
        self, store: JobEventStore
    ) -> None:
        writers_done = asyncio.Event()
        seen: list[int] = []

        async def write(n: int) -> None:
            for _ in range(n):
                await store.append([_requested()])

        async def tail() -> None:
            position = 0
            while True:
                finished = writers_done.is_set()
                batch = await store.read_log(position, 7)
                seen.extend(e.notification_id for e in batch)
                if batch:
                    position = batch[-1].notification_id
                elif finished:
                    return
                await asyncio.sleep(0)

        reader = asyncio.create_task(tail())
        await asyncio.gather(*(write(15) for _ in range(8)))
        writers_done.set()
        await reader

        everything = [e.notification_id for e in await store.read_log(0, 1000)]
        assert len(everything) == 120
        assert seen == everything

    async def test_tracking_starts_at_zero_and_never_goes_backwards(
        self, store: JobEventStore
    ) -> None:
        assert await store.position("projection") == 0

        assert await store.advance("projection", 5) is True
        assert await store.position("projection") == 5
        assert await store.advance("projection", 3) is False
        assert await store.advance("projection", 5) is False
        assert await store.position("projection") == 5
        assert await store.advance("projection", 9) is True
        assert await store.position("projection") == 9

    async def test_tracking_is_kept_per_follower(self, store: JobEventStore) -> None:
        await store.advance("dispatcher", 4)
        await store.advance("emitter", 2)
        assert await store.position("dispatcher") == 4
        assert await store.position("emitter") == 2
        assert await store.position("projection") == 0

    async def test_concurrent_advances_keep_the_highest(self, store: JobEventStore) -> None:
        recorded = await asyncio.gather(*(store.advance("emitter", n) for n in (3, 7, 1, 7, 5, 2)))
        assert await store.position("emitter") == 7
        assert sorted((recorded[1], recorded[3])) == [False, True]  # one 7 only

    async def test_a_committed_append_is_told_before_it_returns_and_a_failed_one_never(
        self, store: JobEventStore
    ) -> None:
        history = _full_history(uuid4())
        told: list[int] = []

        def heard() -> None:
            told.append(len(told))

        with store.appended.subscribed(heard):
            last = await store.append(history)
            assert told == [0]
            with pytest.raises(ConcurrencyConflict):
                await store.append(history[:1])
            assert told == [0]
        await store.append(_full_history(uuid4()))
        assert told == [0]  # no longer subscribed
        assert [e.notification_id for e in await store.read_log(last - 1, 1)] == [last]

    async def test_a_waiter_wakes_on_the_next_append(self, store: JobEventStore) -> None:
        waiting = asyncio.ensure_future(store.appended.wait())
        await asyncio.sleep(0)
        assert not waiting.done()
        await store.append(_full_history(uuid4()))
        await asyncio.wait_for(waiting, 10)  # a bound for a broken store, not a timing

    async def test_check_passes_when_reachable(self, store: JobEventStore) -> None:
        await store.check()

    async def test_calls_after_close_raise_unavailable(self, store: JobEventStore) -> None:
        await store.append([_requested()])
        await store.close()

        with pytest.raises(Unavailable):
            await store.read_log(0, 10)
        with pytest.raises(Unavailable):
            await store.check()
