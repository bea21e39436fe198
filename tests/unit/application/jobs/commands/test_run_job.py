from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from application.jobs.commands.run_job import RunLimits
from application.ports.messaging import Settlement
from domain.connection import SealedSecret
from domain.job import JobClaimed, JobCompleted, JobFailed, JobRequested, JobResultStored
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}


async def _job(app, mapped):
    await app.connection()
    return (await app.request_job(mapped, None, SOURCE, tenant=SINGLE_TENANT)).job


async def test_successful_run_records_claim_result_and_completion(app):
    job = await _job(app, {"pgsql": {"accounts": ["name"]}})
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert [type(e) for e in events] == [JobRequested, JobClaimed, JobResultStored, JobCompleted]
    stored = events[2]
    assert (stored.path, stored.row_count) == (f"external-data/{job.id}.json", 5)


async def test_second_delivery_of_the_same_job_does_nothing(app):
    job = await _job(app, {"pgsql": {"accounts": ["name"]}})
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    assert len(await app.store.job_events(job.id)) == 4


async def test_missing_table_fails_with_reference_message_and_stores_nothing(app):
    app.schemas_unknown_at_submission()
    job = await _job(app, {"pgsql": {"nope": ["id"]}})
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(job.id)
    assert isinstance(failed, JobFailed)
    assert failed.error.startswith(
        "engine extraction: engine: [validation] extraction request failed schema validation"
    )
    assert "nope" in failed.error
    assert app.storage.objects == {}
    await app.emitter.run_once()
    [note] = app.publisher.published
    body = json.loads(note.body)
    assert body == {
        "jobId": str(job.id),
        "metadata": {"error": {"message": failed.error}, "source": "payments"},
        "status": "failed",
    }


async def test_unknown_field_fails_the_job(app):
    app.schemas_unknown_at_submission()
    job = await _job(app, {"pgsql": {"accounts": ["id", "ghost"]}})
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(job.id)
    assert isinstance(failed, JobFailed) and "ghost" in failed.error


async def test_result_over_the_size_limit_is_not_stored(app):
    job = await _job(app, {"pgsql": {"accounts": ["*"]}})
    app.run_job.limits = type(app.run_job.limits)(max_result_bytes=40, retry_backoff=0.0)
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(job.id)
    assert failed.error == (
        "engine extraction: engine: [limit_exceeded] extraction result exceeds the configured "
        "size limit"
    )
    assert app.storage.objects == {} and app.storage.pending_uploads == 0


async def test_query_failure_after_retries_fails_the_job(app):
    job = await _job(app, {"pgsql": {"accounts": ["*"]}})
    app.reader.database("db.local", "pgsql").fail_query = True
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(job.id)
    assert failed.error == "engine extraction: engine: [unavailable] failed to query datasource"
    assert app.storage.objects == {}


async def test_several_datasources_land_in_one_result_in_name_order(app):
    await app.connection("pgsql")
    other = app.reader.database("db.local", "zzz")
    from adapters.memory.datasource_reader import MemoryTable

    other.tables["t"] = MemoryTable(columns=[("v", "text")], rows=[{"v": "x"}])
    await app.connection("zzz")
    job = (
        await app.request_job(
            {"zzz": {"t": ["v"]}, "pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    ).job
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    from adapters.crypto.sealing import open_result

    keys = app.ring.current
    text = open_result(
        app.storage.objects[f"external-data/{job.id}.json"], keys.storage, keys.external_hmac, None
    )
    assert list(json.loads(text)) == ["pgsql", "zzz"]
    assert json.loads(text)["zzz"] == {"t": [{"v": "x"}]}


async def test_one_failing_datasource_fails_the_whole_job(app):
    await app.connection("pgsql")
    app.reader.database("db.local", "zzz").fail_query = True
    app.reader.database("db.local", "zzz").tables["t"] = __import__(
        "adapters.memory.datasource_reader", fromlist=["MemoryTable"]
    ).MemoryTable(columns=[("v", "text")])
    await app.connection("zzz")
    job = (
        await app.request_job(
            {"zzz": {"t": ["v"]}, "pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    ).job
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(job.id)
    assert isinstance(failed, JobFailed)
    assert app.storage.objects == {}


async def test_emitter_retries_until_the_publish_succeeds(app):
    job = await _job(app, {"pgsql": {"accounts": ["id"]}})
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    app.publisher.fail_next(2)
    for _ in range(2):
        try:
            await app.emitter.run_once()
        except Exception:
            pass
    assert app.publisher.published == []
    await app.emitter.run_once()
    assert [n.status for n in app.publisher.published] == ["completed"]
    assert await app.emitter.run_once() == 0


async def test_same_job_delivered_to_two_workers_at_once_is_extracted_once(app):
    import asyncio
    from dataclasses import replace as clone

    job = await _job(app, {"pgsql": {"accounts": ["id"]}})
    other = clone(app.run_job, worker_id="worker-2")
    outcomes = await asyncio.gather(
        app.run_job(job.id, tenant=SINGLE_TENANT), other(job.id, tenant=SINGLE_TENANT)
    )
    assert outcomes == [Settlement.ACK, Settlement.ACK]
    # Both read the job as requested; the second lost the lease to the first, waited on it
    # and found the job done.
    assert app.store.conflicts == 0
    events = await app.store.job_events(job.id)
    assert [type(e).__name__ for e in events] == [
        "JobRequested",
        "JobClaimed",
        "JobResultStored",
        "JobCompleted",
    ]
    assert len(app.storage.objects) == 1


@pytest.mark.parametrize("guarded", [False, True], ids=["direct", "behind the host guard"])
async def test_a_filter_value_that_does_not_convert_fails_the_job_before_any_row_is_read(
    app, guarded
):
    from dataclasses import replace as clone

    from adapters.memory.datasource_reader import MemoryTable
    from adapters.security.guarded_reader import GuardedDatasourceReader
    from adapters.security.host_guard import NetworkHostGuard
    from domain.connection_input import ConnectionInput

    async def resolve(host: str, port: int) -> list[str]:
        return {"ledger.example.com": ["93.184.216.34"]}[host]

    database = app.reader.database("ledger.example.com", "ledger")
    database.tables["entries"] = MemoryTable(columns=[("id", "integer")], rows=[{"id": 1}])
    app.reader.databases[("93.184.216.34", "ledger")] = database
    await app.register(
        "payments",
        ConnectionInput(
            config_name="ledger", type="POSTGRESQL", host="ledger.example.com", port=5432,
            database_name="ledger", user_name="reader", password="pw",
        ),
     tenant=SINGLE_TENANT)  # fmt: skip
    filters = {"ledger": {"entries": {"id": {"gt": ["ten"]}}}}
    job = (
        await app.request_job(
            {"ledger": {"entries": ["id"]}}, filters, SOURCE, tenant=SINGLE_TENANT
        )
    ).job
    run = app.run_job
    if guarded:
        run = clone(run, reader=GuardedDatasourceReader(app.reader, NetworkHostGuard(resolve)))
    await run(job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(job.id)
    assert isinstance(failed, JobFailed)
    assert failed.error == (
        "engine extraction: engine: [validation] invalid filter value: FET-0401 - in datasource "
        "'ledger', filter on 'entries.id' of database 'ledger': operator 'gt' expects an integer "
        "for column type 'integer', got 'ten'"
    )
    assert app.storage.objects == {} and app.storage.pending_uploads == 0


def test_lease_is_short_and_renewed_four_times_per_lease():
    assert RunLimits().lease == timedelta(seconds=20)
    assert RunLimits().heartbeat == 5.0
    assert RunLimits(lease=timedelta(seconds=8)).heartbeat == 2.0
    with pytest.raises(ValueError, match="at least 2 seconds"):
        RunLimits(lease=timedelta(seconds=1))


async def test_credentials_under_a_retired_key_fail_the_job_at_once(app):
    connection = await app.connection()
    job = (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    retired = SealedSecret(connection.password.ciphertext, key_version="0")  # type: ignore[union-attr]
    await app.repository.update(
        replace(connection, password=retired, version=connection.version + 1)
    )
    app.run_job.limits = RunLimits(retry_backoff=30.0)  # a retry would make this test hang
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    last = (await app.store.job_events(job.id))[-1]
    assert isinstance(last, JobFailed)
    assert "key version '0'" in last.error and "[precondition]" in last.error
