"""The projection follower: the job index follows the event log from its own position."""

from __future__ import annotations

import asyncio
import contextlib

from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.messaging import RecordingJobEventPublisher
from application.jobs.repository import EventSourcedJobs
from application.policies.emit_events import EmitJobEvents
from application.policies.follower import LogFollower, ProjectionFollower, SharedLogReads
from domain.errors import Unavailable
from domain.job import JobRequested
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}


async def _requested(app, table="accounts"):
    await app.connection()
    return (
        await app.request_job({"pgsql": {table: ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job


async def _projection(app):
    index = InMemoryJobIndex()
    follower = ProjectionFollower(name="projection", store=app.store, index=index)
    return index, follower


async def test_projection_tracks_status_and_datasources(app):
    index, follower = await _projection(app)
    job = await _requested(app)
    await follower.run_once()
    assert await index.is_connection_in_use("pgsql", tenant=SINGLE_TENANT)
    assert not await index.is_connection_in_use("other", tenant=SINGLE_TENANT)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    await follower.run_once()
    assert index.jobs[job.id].status == "completed"
    assert not await index.is_connection_in_use("pgsql", tenant=SINGLE_TENANT)
    assert await follower.run_once() == 0  # its position moved with its rows


async def test_a_failing_loop_logs_once_when_it_starts_failing_and_once_when_it_recovers(
    caplog,
):
    import asyncio
    import logging

    from application.policies.follower import PeriodicTask

    outcomes = [OSError("db down")] * 5 + [None] * 3
    done = asyncio.Event()

    async def action() -> int:
        if not outcomes:
            done.set()
            return 0
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return 0

    task = PeriodicTask(name="reaper", poll_interval=0.001, max_backoff=0.002, action=action)
    stop = asyncio.Event()
    with caplog.at_level(logging.DEBUG, logger="application.policies.follower"):
        running = asyncio.create_task(task.run(stop))
        await asyncio.wait_for(done.wait(), 5)
        stop.set()
        await running
    above_debug = [
        (r.levelname, r.getMessage()) for r in caplog.records if r.levelno > logging.DEBUG
    ]
    assert above_debug == [
        ("WARNING", "reaper: failing, will retry with backoff: db down"),
        ("INFO", "reaper: recovered"),
    ]


class GatedStore:
    """The app's store, whose first log read waits at a gate (a slow read)."""

    def __init__(self, store):
        self.store = store
        self.reading = asyncio.Event()
        self.gate = asyncio.Event()

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def read_log(self, after, limit):
        logged = await self.store.read_log(after, limit)
        if not self.gate.is_set():
            self.reading.set()
            await self.gate.wait()
        return logged


async def test_a_wake_during_a_read_is_not_lost(app):
    store = GatedStore(app.store)
    seen = []

    async def handle(item):
        seen.append(item.notification_id)

    follower = LogFollower(name="test", store=store, handle=handle, poll_interval=60)
    stop = asyncio.Event()
    running = asyncio.create_task(follower.run(stop))
    try:
        await asyncio.wait_for(store.reading.wait(), 5)  # read the empty log, not returned yet
        await _requested(app)  # the job and its request slot
        follower.wake.set()
        store.gate.set()
        for _ in range(500):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        assert seen == [1, 2]
    finally:
        stop.set()
        await running


class CountingStore:
    """The app's store, counting the positions recorded."""

    def __init__(self, store):
        self.store = store
        self.advances: list[int] = []

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def advance(self, follower, notification_id):
        self.advances.append(notification_id)
        return await self.store.advance(follower, notification_id)


async def _two_jobs(app):
    """Two jobs and their request slots: four events on the log."""
    await _requested(app)
    await app.request_job(
        {"pgsql": {"accounts": ["id", "name"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )


async def test_a_batch_records_its_position_once_after_its_last_event(app):
    store = CountingStore(app.store)
    await _two_jobs(app)
    seen = []

    async def handle(item):
        seen.append(item.notification_id)

    follower = LogFollower(name="test", store=store, handle=handle)
    assert await follower.run_once() == 4
    assert seen == [1, 2, 3, 4]
    assert store.advances == [4]
    assert await app.store.position("test") == 4
    assert await follower.run_once() == 0
    assert store.advances == [4]


async def test_a_failing_event_is_retried_after_the_events_before_it_are_recorded(app):
    store = CountingStore(app.store)
    await _two_jobs(app)
    seen = []

    async def handle(item):
        if item.notification_id == 3 and 3 not in seen:
            seen.append(3)
            raise RuntimeError("the broker is away")
        seen.append(item.notification_id)

    follower = LogFollower(name="test", store=store, handle=handle)
    try:
        await follower.run_once()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure was swallowed")
    assert await app.store.position("test") == 2
    assert await follower.run_once() == 2
    assert seen == [1, 2, 3, 3, 4]
    assert await app.store.position("test") == 4


async def _more(app, batch):
    """Another job (and its request slot) on the connection already registered: the same
    table, told apart by its metadata."""
    metadata = {**SOURCE, "batch": batch}
    return (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, metadata, tenant=SINGLE_TENANT)
    ).job


class TallyingStore(CountingStore):
    """Counts the positions read, the log reads and the job histories read too."""

    def __init__(self, store):
        super().__init__(store)
        self.positions_read = 0
        self.log_reads: list[tuple[int, int]] = []
        self.histories_read = 0

    async def position(self, follower):
        self.positions_read += 1
        return await self.store.position(follower)

    async def read_log(self, after, limit):
        self.log_reads.append((after, limit))
        return await self.store.read_log(after, limit)

    async def job_events(self, job_id):
        self.histories_read += 1
        return await self.store.job_events(job_id)


async def _seen_by(store, name="test", **kwargs):
    seen = []

    async def handle(item):
        seen.append(item.notification_id)

    return seen, LogFollower(name=name, store=store, handle=handle, **kwargs)


async def test_the_position_is_read_once_then_kept_while_this_follower_records_it(app):
    store = TallyingStore(app.store)
    seen, follower = await _seen_by(store)
    await _two_jobs(app)
    assert await follower.run_once() == 4
    await _more(app, "other")
    assert await follower.run_once() == 2
    assert await follower.run_once() == 0
    assert seen == [1, 2, 3, 4, 5, 6]
    assert store.advances == [4, 6]
    assert store.positions_read == 1


async def test_a_kept_position_is_read_again_after_another_relay_recorded_first(app):
    store = TallyingStore(app.store)
    seen, follower = await _seen_by(store)
    await _two_jobs(app)
    await follower.run_once()
    await _more(app, "other")  # 5 and 6
    await app.store.advance("test", 6)  # another relay handled them first
    await _more(app, "third")  # 7 and 8
    assert await follower.run_once() == 4  # from its kept 4: the 5 and 6 again (at least once)
    assert store.advances == [4, 8]
    await app.store.advance("test", 10)  # the other relay again, past what exists
    await _more(app, "fourth")  # 9 and 10
    assert await follower.run_once() == 2
    assert store.advances == [4, 8, 10]  # refused: 10 was recorded first
    assert store.positions_read == 1
    assert await follower.run_once() == 0  # read again: 10, so nothing is left
    assert store.positions_read == 2
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


async def test_after_a_failure_the_position_is_read_again(app):
    store = TallyingStore(app.store)
    await _two_jobs(app)
    failures = [RuntimeError("the broker is away")]

    async def handle(item):
        if item.notification_id == 3 and failures:
            raise failures.pop()

    follower = LogFollower(name="test", store=store, handle=handle)
    with contextlib.suppress(RuntimeError):
        await follower.run_once()
    assert store.positions_read == 1
    assert await follower.run_once() == 2
    assert store.positions_read == 2
    assert await app.store.position("test") == 4


async def test_batches_of_ignored_events_are_recorded_now_and_then_and_when_stopping(app):
    store = TallyingStore(app.store)
    seen, follower = await _seen_by(store, interested=lambda event: False, record_ignored_every=6)
    await _two_jobs(app)
    assert await follower.run_once() == 4
    assert store.advances == []  # 4 ids past the record, fewer than 6
    await _more(app, "other")
    assert await follower.run_once() == 2
    assert store.advances == [6]
    await _more(app, "third")
    assert await follower.run_once() == 2
    assert store.advances == [6]
    stop = asyncio.Event()
    stop.set()
    await follower.run(stop)  # stops at once, and records where it is
    assert store.advances == [6, 8]
    assert seen == []  # never handed an event it is not interested in


async def test_an_interesting_event_records_the_whole_batch_at_once(app):
    store = TallyingStore(app.store)
    await _two_jobs(app)
    seen, follower = await _seen_by(store, interested=lambda event: isinstance(event, JobRequested))
    assert await follower.run_once() == 4
    assert len(seen) == 2
    assert store.advances == [4]


async def test_followers_woken_together_share_one_read_of_the_log(app):
    store = TallyingStore(app.store)
    reads = SharedLogReads(store)
    await _two_jobs(app)
    first, one = await _seen_by(store, "one", reads=reads)
    second, two = await _seen_by(store, "two", reads=reads, batch=2)
    index = InMemoryJobIndex()
    projection = ProjectionFollower(name="projection", store=store, index=index, reads=reads)
    counts = await asyncio.gather(one.run_once(), two.run_once(), projection.run_once())
    assert counts == [4, 2, 4]
    assert store.log_reads == [(0, 500)]
    assert first == [1, 2, 3, 4] and second == [1, 2]
    assert await index.position() == 4
    assert not two.caught_up  # its batch ended before the log did


class FirstReadGated(GatedStore):
    """Only the first log read waits at the gate."""

    async def read_log(self, after, limit):
        if self.reading.is_set():
            return await self.store.read_log(after, limit)
        return await super().read_log(after, limit)


async def test_a_read_begun_before_a_follower_asked_is_not_shared_with_it(app):
    store = FirstReadGated(TallyingStore(app.store))
    reads = SharedLogReads(store)
    first, one = await _seen_by(store, "one", reads=reads)
    second, two = await _seen_by(store, "two", reads=reads)
    reading = asyncio.create_task(one.run_once())
    await asyncio.wait_for(store.reading.wait(), 5)  # "one" read the empty log
    await _requested(app)
    assert await two.run_once() == 2  # its own read sees what came meanwhile
    store.gate.set()
    assert await reading == 0
    assert (first, second) == ([], [1, 2])


async def test_a_follower_that_joined_a_failed_read_fails_too_and_reads_anew_next_time(app):
    store = TallyingStore(app.store)
    reads = SharedLogReads(store)
    await _two_jobs(app)
    _, one = await _seen_by(store, "one", reads=reads)
    _, two = await _seen_by(store, "two", reads=reads)
    app.store.unavailable = True
    outcomes = await asyncio.gather(one.run_once(), two.run_once(), return_exceptions=True)
    assert all(isinstance(o, Unavailable) for o in outcomes)
    app.store.unavailable = False
    assert await asyncio.gather(one.run_once(), two.run_once()) == [4, 4]


async def test_a_round_that_read_to_the_end_of_the_log_waits_to_be_woken(app):
    store = TallyingStore(app.store)
    await _two_jobs(app)
    seen, follower = await _seen_by(store, poll_interval=60)
    stop = asyncio.Event()
    running = asyncio.create_task(follower.run(stop))
    try:
        for _ in range(500):
            if len(seen) == 4:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert store.log_reads == [(0, 100)]  # not read again at once
        await _more(app, "other")
        follower.wake.set()
        for _ in range(500):
            if len(seen) == 6:
                break
            await asyncio.sleep(0.01)
        assert store.log_reads == [(0, 100), (4, 100)]
    finally:
        stop.set()
        await running


async def test_a_projection_keeps_its_position_and_corrects_it_from_the_index(app):
    store = TallyingStore(app.store)
    index = CountingIndex()
    follower = ProjectionFollower(name="projection", store=store, index=index)
    await _two_jobs(app)
    assert await follower.run_once() == 4
    await _more(app, "other")
    assert await follower.run_once() == 2
    assert index.positions_read == 1
    assert index.afters == [0, 4]
    # Another process projected further meanwhile: the index answers where it is.
    await _more(app, "third")
    await index.project(await app.store.read_log(0, 100))
    await _more(app, "fourth")
    assert await follower.run_once() == 4  # from its kept 6: 7..10, of which 9 and 10 are new
    assert await follower.run_once() == 0
    assert index.positions_read == 1
    assert index.afters == [0, 4, None, 6]  # None: the other process
    assert await index.position() == 10


class CountingIndex(InMemoryJobIndex):
    def __init__(self):
        super().__init__()
        self.positions_read = 0
        self.afters: list[int | None] = []

    async def position(self):
        self.positions_read += 1
        return await super().position()

    async def project(self, logged, *, after=None):
        self.afters.append(after)
        return await super().project(logged, after=after)


async def _completed_job(app):
    job = await _requested(app)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    return job


async def _emitter(store, publisher, name="emitter"):
    emit = EmitJobEvents(EventSourcedJobs(store), publisher)
    return LogFollower(
        name=name,
        store=store,
        handle=emit,
        interested=EmitJobEvents.interested,
        observe=emit.observe,
    )


async def test_the_emitter_folds_a_job_it_saw_from_the_start_from_the_log(app):
    store = TallyingStore(app.store)
    job = await _completed_job(app)
    publisher = RecordingJobEventPublisher()
    await (await _emitter(store, publisher)).run_once()
    assert store.histories_read == 0
    # The same job, by an emitter that began after its request: read from the store.
    late_store = TallyingStore(app.store)
    await app.store.advance("late", 2)  # past the request and its slot
    late = RecordingJobEventPublisher()
    await (await _emitter(late_store, late, "late")).run_once()
    assert late_store.histories_read == 1
    assert [n.job_id for n in publisher.published] == [job.id]
    assert publisher.published == late.published


async def test_the_emitter_forgets_the_oldest_jobs_beyond_its_bound(app):
    store = TallyingStore(app.store)
    emit = EmitJobEvents(EventSourcedJobs(store), RecordingJobEventPublisher(), remembered_jobs=1)
    follower = LogFollower(
        name="emitter",
        store=store,
        handle=emit,
        interested=EmitJobEvents.interested,
        observe=emit.observe,
    )
    first = await _requested(app)
    second = await _more(app, "other")
    await app.run_job(first.id, tenant=SINGLE_TENANT)
    await app.run_job(second.id, tenant=SINGLE_TENANT)
    await follower.run_once()
    assert [n.job_id for n in emit.publisher.published] == [first.id, second.id]
    assert store.histories_read == 1  # the first one, forgotten when the second came


async def test_with_a_record_delay_effects_are_recorded_once_for_the_batches_of_that_time(app):
    store = TallyingStore(app.store)
    await _two_jobs(app)
    seen, follower = await _seen_by(store, poll_interval=60, record_delay=0.2)
    stop = asyncio.Event()
    running = asyncio.create_task(follower.run(stop))
    try:
        for _ in range(500):
            if len(seen) == 4:
                break
            await asyncio.sleep(0.01)
        await _more(app, "other")
        follower.wake.set()
        for _ in range(500):
            if len(seen) == 6:
                break
            await asyncio.sleep(0.01)
        assert store.advances == []  # both batches handled, nothing recorded yet
        for _ in range(500):
            if store.advances:
                break
            await asyncio.sleep(0.01)
        assert store.advances == [6]  # without another wake, once the delay ran out
        await _more(app, "third")
        follower.wake.set()
        for _ in range(500):
            if len(seen) == 8:
                break
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await running
    assert store.advances == [6, 8]  # stopping records what was owed
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8]
