"""One contract for every ``JobIndex``: the in-memory twin (unit suite), SQLite and PostgreSQL
(integration suite).

A subclass provides an ``index`` fixture yielding a fresh, empty index.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from application.ports.job_event_store import LoggedEvent
from application.ports.job_index import JobIndex, JobSearch
from application.ports.job_progress import JobProgress
from domain import job as jobs
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANT, Tenant

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
LEASE = timedelta(minutes=10)


def _request(names: list[str], source: str = "p") -> ExtractionRequest:
    return ExtractionRequest.create({n: {"t": ["a"]} for n in names}, None, {"source": source})


class Log:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, *events: object) -> list[LoggedEvent]:
        out = []
        for event in events:
            self.n += 1
            out.append(LoggedEvent(self.n, event))  # type: ignore[arg-type]
        return out


class JobIndexContract:
    async def test_search_lists_a_tenants_jobs_newest_first_filtered_and_paged(
        self, index: JobIndex
    ) -> None:
        log = Log()
        other = Tenant("tenant-b")
        made = []
        for n in range(6):
            names = ["alpha"] if n % 2 else ["alpha", "beta"]
            job_id = uuid.UUID(int=n + 1)
            made.append(
                jobs.request_job(
                    job_id,
                    _request(names, "payments" if n < 3 else "ledger"),
                    T0 + timedelta(minutes=n // 2),  # two jobs per minute: ties ordered by id
                    tenant=SINGLE_TENANT,
                )
            )
        theirs = jobs.request_job(uuid.uuid4(), _request(["alpha"]), T0, tenant=other)
        await index.project(log(*made, theirs))
        failed = jobs.fail(jobs.fold([made[0]]), "x", T0)
        await index.project(log(failed))

        def ids(found: list) -> list[int]:
            return [summary.job_id.int for summary in found]

        everything = await index.search(JobSearch(tenant=SINGLE_TENANT))
        assert ids(everything) == [6, 5, 4, 3, 2, 1]
        assert [s.source for s in everything] == ["ledger"] * 3 + ["payments"] * 3
        assert everything[-1].status == "failed" and everything[-1].datasources == (
            "alpha",
            "beta",
        )
        first = await index.search(JobSearch(tenant=SINGLE_TENANT, limit=4))
        cursor = (first[-1].created_at, first[-1].job_id)
        rest = await index.search(JobSearch(tenant=SINGLE_TENANT, older_than=cursor, limit=4))
        assert ids(first) == [6, 5, 4, 3] and ids(rest) == [2, 1]
        search = JobSearch(tenant=SINGLE_TENANT, status="failed")
        assert ids(await index.search(search)) == [1]
        search = JobSearch(tenant=SINGLE_TENANT, source="payments", status="pending")
        assert ids(await index.search(search)) == [3, 2]
        search = JobSearch(tenant=SINGLE_TENANT, config_name="beta")
        assert ids(await index.search(search)) == [5, 3, 1]
        window = JobSearch(
            tenant=SINGLE_TENANT,
            created_from=T0 + timedelta(minutes=1),
            created_until=T0 + timedelta(minutes=2),
        )
        assert ids(await index.search(window)) == [4, 3]
        assert len(await index.search(JobSearch(tenant=other))) == 1
        assert await index.search(JobSearch(tenant=Tenant("nobody"))) == []

    async def test_starts_empty_at_position_zero(self, index: JobIndex) -> None:
        assert await index.position() == 0
        assert not await index.is_connection_in_use("x", tenant=SINGLE_TENANT)

    async def test_requested_job_uses_its_datasources_until_it_ends(self, index: JobIndex) -> None:
        log = Log()
        requested = jobs.request_job(
            uuid.uuid4(), _request(["alpha", "beta"]), T0, tenant=SINGLE_TENANT
        )
        await index.project(log(requested))
        assert await index.position() == 1
        assert await index.is_connection_in_use("alpha", tenant=SINGLE_TENANT)
        assert await index.is_connection_in_use("beta", tenant=SINGLE_TENANT)
        job = jobs.fold([requested])
        claimed = jobs.claim(job, "w", T0, LEASE)
        await index.project(log(claimed))
        assert await index.is_connection_in_use("alpha", tenant=SINGLE_TENANT)
        failed = jobs.fail(jobs.fold([claimed], job), "x", T0, "w")
        await index.project(log(failed))
        assert not await index.is_connection_in_use("alpha", tenant=SINGLE_TENANT)
        assert await index.position() == 3

    async def test_replayed_batches_change_nothing(self, index: JobIndex) -> None:
        log = Log()
        requested = jobs.request_job(uuid.uuid4(), _request(["alpha"]), T0, tenant=SINGLE_TENANT)
        batch = log(requested)
        await index.project(batch)
        failed = jobs.fail(jobs.fold([requested]), "x", T0)
        second = log(failed)
        await index.project(second)
        await index.project(batch)  # an old batch again: ignored
        assert not await index.is_connection_in_use("alpha", tenant=SINGLE_TENANT)
        assert await index.position() == 2

    async def test_project_answers_its_position_after_the_batch(self, index: JobIndex) -> None:
        log = Log()
        requested = jobs.request_job(uuid.uuid4(), _request(["alpha"]), T0, tenant=SINGLE_TENANT)
        assert await index.project(log(requested), after=0) == 1
        claimed = jobs.claim(jobs.fold([requested]), "w", T0, LEASE)
        assert await index.project(log(claimed), after=1) == 2
        assert await index.position() == 2
        summary = (await index.stalled(now=T0 + LEASE, pending_before=T0))[0]
        assert (summary.status, summary.attempts) == ("processing", 1)

    async def test_a_wrong_belief_of_the_position_projects_only_what_is_new(
        self, index: JobIndex
    ) -> None:
        """Another process projected meanwhile: the caller still believes the old position."""
        log = Log()
        alpha = jobs.request_job(uuid.uuid4(), _request(["alpha"]), T0, tenant=SINGLE_TENANT)
        beta = jobs.request_job(uuid.uuid4(), _request(["beta"]), T0, tenant=SINGLE_TENANT)
        first, second = log(alpha), log(beta)
        await index.project([*first, *second])  # the other process, up to 2
        failed = jobs.fail(jobs.fold([alpha]), "x", T0)
        third = log(failed)
        # This caller believes it is at 0 and has read 1..3: only 3 is new.
        assert await index.project([*first, *second, *third], after=0) == 3
        assert not await index.is_connection_in_use("alpha", tenant=SINGLE_TENANT)
        assert await index.is_connection_in_use("beta", tenant=SINGLE_TENANT)
        # Believing it is at 1 with a batch the index already has changes nothing.
        assert await index.project(second, after=1) == 3
        assert await index.position() == 3

    async def test_stalled_lists_old_pending_and_expired_leases(self, index: JobIndex) -> None:
        log = Log()
        old = jobs.request_job(uuid.uuid4(), _request(["a1"]), T0, tenant=SINGLE_TENANT)
        young = jobs.request_job(
            uuid.uuid4(), _request(["a2"]), T0 + timedelta(hours=2), tenant=SINGLE_TENANT
        )
        busy = jobs.request_job(uuid.uuid4(), _request(["a3"]), T0, tenant=SINGLE_TENANT)
        claim = jobs.claim(jobs.fold([busy]), "w", T0, LEASE)
        await index.project(log(old, young, busy, claim))
        now = T0 + timedelta(hours=2, minutes=30)
        stalled = await index.stalled(now=now, pending_before=now - timedelta(hours=1))
        assert {s.job_id for s in stalled} == {old.originator_id, busy.originator_id}
        by_id = {s.job_id: s for s in stalled}
        assert by_id[busy.originator_id].status == "processing"
        assert by_id[busy.originator_id].lease_until == T0 + LEASE
        assert by_id[busy.originator_id].attempts == 1
        assert by_id[old.originator_id].datasources == ("a1",)
        early = await index.stalled(now=T0 + timedelta(minutes=5), pending_before=T0)
        assert early == []

    async def test_a_tenants_jobs_use_only_that_tenants_datasources(self, index: JobIndex) -> None:
        a, b = Tenant("tenant-a"), Tenant("tenant-b")
        log = Log()
        in_a = jobs.request_job(uuid.uuid4(), _request(["alpha"]), T0, a)
        single = jobs.request_job(uuid.uuid4(), _request(["beta"]), T0, tenant=SINGLE_TENANT)
        await index.project(log(in_a, single))
        assert await index.is_connection_in_use("alpha", tenant=a)
        assert not await index.is_connection_in_use("alpha", tenant=b)
        assert not await index.is_connection_in_use("alpha", tenant=SINGLE_TENANT)
        assert await index.is_connection_in_use("beta", tenant=SINGLE_TENANT)
        assert not await index.is_connection_in_use("beta", tenant=a)
        stalled = await index.stalled(now=T0, pending_before=T0 + timedelta(seconds=1))
        assert {s.job_id: s.tenant for s in stalled} == {
            in_a.originator_id: a,
            single.originator_id: SINGLE_TENANT,
        }

    async def test_progress_keeps_the_latest_report_of_a_running_job(self, index) -> None:
        job_id, unknown = uuid.uuid4(), uuid.uuid4()
        assert await index.progresses([job_id]) == {}
        await index.record(JobProgress(job_id, 1, 100, 2_000, T0))
        later = JobProgress(job_id, 1, 5_000_000_000, 9_000_000_000, T0 + timedelta(seconds=5))
        await index.record(later)
        assert await index.progresses([job_id]) == {job_id: later}
        assert await index.progresses([unknown]) == {}
        assert await index.progresses([]) == {}

    async def test_progresses_reads_the_reports_of_several_jobs_at_once(self, index) -> None:
        first, second, silent = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        reports = [JobProgress(first, 1, 10, 100, T0), JobProgress(second, 2, 20, 200, T0)]
        for report in reports:
            await index.record(report)
        found = await index.progresses([first, second, silent])
        assert found == {first: reports[0], second: reports[1]}

    async def test_progress_is_dropped_when_the_job_ends(self, index) -> None:
        log = Log()
        requested = jobs.request_job(uuid.uuid4(), _request(["alpha"]), T0, tenant=SINGLE_TENANT)
        claimed = jobs.claim(jobs.fold([requested]), "w", T0, LEASE)
        await index.project(log(requested, claimed))
        job_id = requested.originator_id
        await index.record(JobProgress(job_id, 1, 10, 200, T0))
        await index.project(log(jobs.fail(jobs.fold([requested, claimed]), "x", T0, "w")))
        assert await index.progresses([job_id]) == {}

    async def test_a_lease_is_taken_by_one_claim_and_renewed_only_by_it(self, index) -> None:
        job_id = uuid.uuid4()
        short = timedelta(seconds=20)
        assert await index.hold(job_id) is None
        assert await index.take(job_id, 1, "w1", T0, T0 + short)
        assert not await index.take(job_id, 1, "w2", T0, T0 + short)  # same claim number
        assert not await index.take(job_id, 2, "w2", T0, T0 + short)  # still live
        assert await index.renew(job_id, 1, "w1", T0 + 2 * short)
        assert not await index.take(job_id, 2, "w2", T0 + short, T0 + 2 * short)  # renewed
        later = T0 + 2 * short
        assert await index.take(job_id, 2, "w2", later, later + short)  # ended: taken over
        assert not await index.renew(job_id, 1, "w1", later + short)  # the old claim lost it
        held = await index.hold(job_id)
        assert (held.attempt, held.worker_id, held.until) == (2, "w2", later + short)
        await index.release(job_id, 1, "w1", later)  # not the holder: nothing happens
        assert (await index.hold(job_id)).until == later + short
        await index.release(job_id, 2, "w2", later)
        assert await index.take(job_id, 3, "w3", later, later + short)  # handed back: at once

    async def test_of_concurrent_takers_of_a_lease_exactly_one_wins(self, index) -> None:
        job_id = uuid.uuid4()
        short = timedelta(seconds=20)
        workers = [f"w{n}" for n in range(6)]
        first = await asyncio.gather(*(index.take(job_id, 1, w, T0, T0 + short) for w in workers))
        assert sorted(first) == [False] * 5 + [True]
        later = T0 + 2 * short  # that lease ran out: the next claim is taken once too
        second = await asyncio.gather(
            *(index.take(job_id, 2, w, later, later + short) for w in workers)
        )
        assert sorted(second) == [False] * 5 + [True]
        held = await index.hold(job_id)
        assert (held.attempt, held.worker_id) == (2, workers[second.index(True)])

    async def test_stalled_follows_the_renewed_lease_and_leases_drop_when_jobs_end(
        self, index
    ) -> None:
        log = Log()
        short = timedelta(seconds=20)
        alive = jobs.request_job(uuid.uuid4(), _request(["a1"]), T0, tenant=SINGLE_TENANT)
        dead = jobs.request_job(uuid.uuid4(), _request(["a2"]), T0, tenant=SINGLE_TENANT)
        for requested, worker in ((alive, "alive"), (dead, "dead")):
            assert await index.take(requested.originator_id, 1, worker, T0, T0 + short)
        claims = [
            jobs.claim(jobs.fold([r]), w, T0, short) for r, w in ((alive, "alive"), (dead, "dead"))
        ]
        await index.project(log(alive, dead, *claims))
        now = T0 + timedelta(seconds=30)
        assert await index.renew(alive.originator_id, 1, "alive", now + short)
        stalled = await index.stalled(now=now, pending_before=T0)
        assert [s.job_id for s in stalled] == [dead.originator_id]
        ended = jobs.fail(jobs.fold([alive, claims[0]]), "x", now, "alive")
        await index.project(log(ended))
        assert await index.hold(alive.originator_id) is None
