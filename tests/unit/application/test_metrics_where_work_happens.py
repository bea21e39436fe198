"""Each series moves when its thing happens: the service wired by ``bootstrap`` counts into its
own Prometheus registry, read here sample by sample."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest

from adapters.memory.job_index import InMemoryJobIndex
from application.jobs.commands.run_job import RunLimits
from application.policies.follower import ProjectionFollower
from application.policies.reap_jobs import ReapJobs
from application.ports.metrics import FailureReason
from domain import job as jobs
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}
LEASE = timedelta(minutes=10)


def sample(app, name: str, **labels: str) -> float:
    value = app.fetcher.probes.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.fixture(autouse=True)
async def connected(app):
    await app.connection()


async def _requested(app, table: str = "accounts", tag: str = ""):
    metadata = {**SOURCE, "tag": tag} if tag else SOURCE
    return (
        await app.request_job({"pgsql": {table: ["id"]}}, None, metadata, tenant=SINGLE_TENANT)
    ).job


async def test_every_series_exists_at_zero_before_anything_happens(app):
    for reason in FailureReason:
        assert (
            app.fetcher.probes.metrics.registry.get_sample_value(
                "fetcher_jobs_failed_total", {"reason": reason.value}
            )
            == 0.0
        )
    for name, labels in [
        ("fetcher_jobs_requested_total", {"outcome": "created"}),
        ("fetcher_jobs_requested_total", {"outcome": "duplicate"}),
        ("fetcher_jobs_completed_total", {}),
        ("fetcher_job_duration_seconds_count", {"outcome": "completed"}),
        ("fetcher_job_duration_seconds_count", {"outcome": "failed"}),
        ("fetcher_job_result_rows_count", {}),
        ("fetcher_job_result_bytes_count", {}),
        ("fetcher_result_upload_seconds_count", {}),
        ("fetcher_lease_expiries_total", {}),
        ("fetcher_job_reclaims_total", {}),
        ("fetcher_publish_failures_total", {"kind": "work_order"}),
        ("fetcher_publish_failures_total", {"kind": "event"}),
        ("fetcher_publish_retries_total", {"kind": "work_order"}),
        ("fetcher_publish_retries_total", {"kind": "event"}),
        ("fetcher_follower_lag_notifications", {"follower": "dispatcher"}),
        ("fetcher_follower_lag_notifications", {"follower": "emitter"}),
        ("fetcher_follower_lag_notifications", {"follower": "projection"}),
    ]:
        registry = app.fetcher.probes.metrics.registry
        assert registry.get_sample_value(name, labels) == 0.0, (name, labels)


async def test_a_new_job_and_a_duplicate_are_counted_apart(app):
    await _requested(app)
    assert sample(app, "fetcher_jobs_requested_total", outcome="created") == 1
    await _requested(app)
    assert sample(app, "fetcher_jobs_requested_total", outcome="duplicate") == 1
    assert sample(app, "fetcher_jobs_requested_total", outcome="created") == 1


async def test_a_completed_job_counts_its_duration_rows_bytes_and_upload(app):
    job = await _requested(app)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    stored = (await app.store.job_events(job.id))[2]
    assert sample(app, "fetcher_jobs_completed_total") == 1
    assert sample(app, "fetcher_job_duration_seconds_count", outcome="completed") == 1
    assert sample(app, "fetcher_job_duration_seconds_sum", outcome="completed") > 0
    assert sample(app, "fetcher_job_result_rows_sum") == stored.row_count == 5
    assert sample(app, "fetcher_job_result_rows_bucket", le="10.0") == 1
    assert sample(app, "fetcher_job_result_bytes_sum") == stored.size_bytes
    assert sample(app, "fetcher_result_upload_seconds_count") == 1
    assert sum(sample(app, "fetcher_jobs_failed_total", reason=r.value) for r in FailureReason) == 0


def _storage_down_past_the_window(app) -> None:
    app.storage.unavailable = True
    app.run_job.limits = dataclasses.replace(app.run_job.limits, outage_window=0.2)


@pytest.mark.parametrize(
    ("arrange", "reason"),
    [
        (lambda app: None, "validation"),
        (lambda app: setattr(app.reader.database("db.local", "pgsql"), "fail_query", True),
         "unavailable"),
        (lambda app: _storage_down_past_the_window(app), "storage"),
        (lambda app: setattr(app.run_job, "limits", RunLimits(max_result_bytes=40)),
         "limit_exceeded"),
        (lambda app: setattr(app.run_job, "limits", RunLimits(timeout=1e-6)),
         "timeout"),
    ],
    ids=["validation", "unavailable", "storage", "limit_exceeded", "timeout"],
)  # fmt: skip
async def test_a_failed_job_is_counted_by_its_reason_class(app, arrange, reason):
    app.schemas_unknown_at_submission()
    table = "nope" if reason == "validation" else "accounts"
    job = await _requested(app, table)
    arrange(app)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    assert jobs.fold(await app.store.job_events(job.id)).status == "failed"
    assert sample(app, "fetcher_jobs_failed_total", reason=reason) == 1
    others = [r.value for r in FailureReason if r.value != reason]
    assert all(sample(app, "fetcher_jobs_failed_total", reason=r) == 0 for r in others)
    assert sample(app, "fetcher_job_duration_seconds_count", outcome="failed") == 1
    assert sample(app, "fetcher_jobs_completed_total") == 0


async def test_an_outcome_that_was_not_recorded_is_not_counted(app):
    job = await _requested(app)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    again = await app.run_job(job.id, tenant=SINGLE_TENANT)  # a second delivery: nothing to do
    assert again.value == "ack"
    assert sample(app, "fetcher_jobs_completed_total") == 1


async def test_work_order_publish_failures_and_retries(app):
    await _requested(app)
    app.queue.fail_next(2)
    for _ in range(2):
        with pytest.raises(Exception, match="simulated publish failure"):
            await app.dispatcher.run_once()
    assert sample(app, "fetcher_publish_failures_total", kind="work_order") == 2
    assert sample(app, "fetcher_publish_retries_total", kind="work_order") == 1
    await app.dispatcher.run_once()
    assert len(app.queue.published) == 1
    assert sample(app, "fetcher_publish_retries_total", kind="work_order") == 2
    assert sample(app, "fetcher_publish_failures_total", kind="event") == 0


async def test_a_dispatch_that_fails_past_its_deadline_fails_the_job_as_dispatch(app):
    await _requested(app)
    app.queue.fail_next(100)
    with pytest.raises(Exception, match="simulated"):
        await app.dispatcher.run_once()
    app.clock.advance(minutes=11)
    await app.dispatcher.run_once()
    assert sample(app, "fetcher_jobs_failed_total", reason="dispatch") == 1
    assert sample(app, "fetcher_publish_failures_total", kind="work_order") == 2
    assert sample(app, "fetcher_publish_retries_total", kind="work_order") == 1


async def test_event_publish_failures_and_retries(app):
    job = await _requested(app)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    app.publisher.fail_next(1)
    with pytest.raises(Exception, match="simulated"):
        await app.emitter.run_once()
    await app.emitter.run_once()
    assert [n.status for n in app.publisher.published] == ["completed"]
    assert sample(app, "fetcher_publish_failures_total", kind="event") == 1
    assert sample(app, "fetcher_publish_retries_total", kind="event") == 1
    assert sample(app, "fetcher_publish_failures_total", kind="work_order") == 0


def _reaper(app, index) -> ReapJobs:
    return ReapJobs(app.jobs, index, app.queue, app.clock, metrics=app.fetcher.probes.metrics)


async def _projected(app, index):
    await ProjectionFollower(name="projection", store=app.store, index=index).run_once()


async def test_an_expired_lease_is_counted_once_and_each_reclaim_dispatch(app):
    index = InMemoryJobIndex()
    job = await _requested(app)
    await app.store.append([jobs.claim(job, "dead-worker", app.clock.now(), LEASE)])
    await _projected(app, index)
    reaper = _reaper(app, index)
    assert await reaper() == 0
    assert sample(app, "fetcher_lease_expiries_total") == 0
    app.clock.advance(minutes=11)
    assert await reaper() == 1
    assert (
        sample(app, "fetcher_lease_expiries_total"),
        sample(app, "fetcher_job_reclaims_total"),
    ) == (1, 1)
    assert await reaper() == 0  # found again, not dispatched again yet
    app.clock.advance(minutes=5)
    assert await reaper() == 1  # dispatched again: the same expired lease
    assert (
        sample(app, "fetcher_lease_expiries_total"),
        sample(app, "fetcher_job_reclaims_total"),
    ) == (1, 2)


async def test_the_reaper_counts_a_failed_reclaim_dispatch_and_its_retry(app):
    index = InMemoryJobIndex()
    job = await _requested(app)
    await app.store.append([jobs.claim(job, "dead-worker", app.clock.now(), LEASE)])
    await _projected(app, index)
    reaper = _reaper(app, index)
    app.clock.advance(minutes=11)
    app.queue.fail_next(1)
    assert await reaper() == 0  # left for the next round
    assert sample(app, "fetcher_publish_failures_total", kind="work_order") == 1
    assert sample(app, "fetcher_job_reclaims_total") == 0
    assert await reaper() == 1
    assert sample(app, "fetcher_publish_retries_total", kind="work_order") == 1
    assert sample(app, "fetcher_job_reclaims_total") == 1
    assert sample(app, "fetcher_lease_expiries_total") == 1


async def test_jobs_the_reaper_fails_are_counted_as_abandoned_or_not_picked_up(app):
    index = InMemoryJobIndex()
    abandoned = await _requested(app, tag="abandoned")
    for attempt in range(3):
        current = jobs.fold(await app.store.job_events(abandoned.id))
        await app.store.append([jobs.claim(current, f"w{attempt}", app.clock.now(), LEASE)])
        app.clock.advance(minutes=11)
    await _projected(app, index)
    assert await _reaper(app, index)() == 1
    assert sample(app, "fetcher_jobs_failed_total", reason="abandoned") == 1
    assert sample(app, "fetcher_lease_expiries_total") == 1

    index = InMemoryJobIndex()
    await _requested(app, tag="forgotten")
    await _projected(app, index)
    app.clock.advance(hours=2)
    assert await _reaper(app, index)() == 1
    assert sample(app, "fetcher_jobs_failed_total", reason="not_picked_up") == 1


async def test_a_follower_reports_how_far_behind_the_log_it_is(app):
    for tag in ("a", "b", "c"):
        await _requested(app, tag=tag)  # two events each: the request and its dedup slot
    dispatcher = app.dispatcher
    dispatcher.batch = 2
    lag = []
    for _ in range(4):
        await dispatcher.run_once()
        lag.append(sample(app, "fetcher_follower_lag_notifications", follower="dispatcher"))
    assert lag == [4, 2, 0, 0]
    assert await app.store.last_notification_id() == 6

    projection = app.fetcher.relay.projection
    await projection.run_once()
    assert sample(app, "fetcher_follower_lag_notifications", follower="projection") == 0


async def test_a_stuck_follower_shows_what_it_has_still_to_handle(app):
    job = await _requested(app)
    app.publisher.fail_next(1000)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    emitter = app.emitter
    stop = asyncio.Event()
    running = asyncio.create_task(emitter.run(stop))
    try:
        for _ in range(100):
            if sample(app, "fetcher_follower_lag_notifications", follower="emitter") > 0:
                break
            await asyncio.sleep(0.02)
        # It went past the request, slot, claim and result (nothing to publish for them) and
        # is stuck on the completion, the last event of the log.
        assert await app.store.position("emitter") == 4
        assert await app.store.last_notification_id() == 5
        assert sample(app, "fetcher_follower_lag_notifications", follower="emitter") == 1
    finally:
        stop.set()
        await running
    assert sample(app, "fetcher_publish_failures_total", kind="event") >= 1
