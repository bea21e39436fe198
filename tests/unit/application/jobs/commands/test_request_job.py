from __future__ import annotations

import asyncio

import pytest

from adapters.crypto.sealing import open_result
from application.errors import ConnectFailure, DatasourceError
from domain.errors import ConcurrencyConflict, InvalidRequest
from domain.job import JobFailed, JobRequested
from domain.tenant import SINGLE_TENANT

SOURCE = {"source": "payments"}


async def test_new_request_records_requested_and_is_dispatched(app):
    await app.connection()
    result = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    assert result.created and result.job.status == "pending"
    events = await app.store.job_events(result.job.id)
    assert [type(e) for e in events] == [JobRequested]
    assert await app.dispatcher.run_once() == 2  # the job's event and its request slot
    assert [o.job_id for o in app.queue.published] == [result.job.id]


async def test_identical_request_within_window_returns_existing_job(app):
    await app.connection()
    first = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    second = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    assert not second.created and second.job.id == first.job.id


async def test_twenty_concurrent_identical_requests_create_one_job(app):
    await app.connection()
    results = await asyncio.gather(
        *(
            app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
            for _ in range(20)
        )
    )
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1
    # All twenty found the slot free; nineteen lost the append and retried into the winner.
    assert app.store.conflicts == 19


async def test_a_request_that_keeps_conflicting_gives_up_after_three_tries(app, monkeypatch):
    await app.connection()
    appends = []

    async def conflicting(events):
        appends.append(events)
        raise ConcurrencyConflict("taken")

    monkeypatch.setattr(app.store, "append", conflicting)
    with pytest.raises(ConcurrencyConflict, match="could not be recorded"):
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    assert len(appends) == 3


async def test_failed_job_does_not_block_a_new_request(app):
    app.schemas_unknown_at_submission()
    await app.connection()
    first = await app.request_job(
        {"pgsql": {"missing": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    await app.run_job(first.job.id, tenant=SINGLE_TENANT)
    second = await app.request_job(
        {"pgsql": {"missing": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    assert second.created and second.job.id != first.job.id


async def test_completed_job_blocks_only_for_five_minutes(app):
    await app.connection()
    first = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    await app.run_job(first.job.id, tenant=SINGLE_TENANT)
    app.clock.advance(minutes=4)
    assert not (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).created
    app.clock.advance(minutes=2)
    assert (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).created


async def test_active_job_blocks_even_after_five_minutes(app):
    await app.connection()
    first = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    app.clock.advance(hours=2)
    again = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
    )
    assert not again.created and again.job.id == first.job.id


@pytest.mark.parametrize(
    ("setup", "source", "code", "message"),
    [
        (
            None,
            "payments",
            "FET-1020",
            "No connections configured for the requested datasources: "
            "no connection is named 'pgsql'",
        ),
        (
            "other",
            "payments",
            "FET-1016",
            "Connection 'pgsql' does not belong to the product identified by source 'payments'",
        ),
    ],
)
async def test_connection_resolution_and_ownership_errors(app, setup, source, code, message):
    if setup:
        await app.connection(product=setup)
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job(
            {"pgsql": {"accounts": ["id"]}}, None, {"source": source}, tenant=SINGLE_TENANT
        )
    assert (caught.value.code, caught.value.message) == (code, message)


async def test_missing_one_of_several_datasources_is_named(app):
    await app.connection()
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job(
            {"pgsql": {"a": ["id"]}, "zzz": {"b": ["x"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    assert caught.value.code == "FET-1020"
    assert caught.value.message == "No connection configured for datasource 'zzz'"


async def test_source_is_compared_after_normalisation(app):
    await app.connection()
    result = await app.request_job(
        {"pgsql": {"accounts": ["id"]}}, None, {"source": " Payments "}, tenant=SINGLE_TENANT
    )
    assert result.created


async def test_unreachable_connection_is_refused_before_recording(app):
    await app.connection()
    app.reader.database("db.local", "pgsql").fail_connect = True
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    assert (caught.value.code, caught.value.message) == (
        "FET-1040",
        "Connection 'pgsql' is not available",
    )
    assert await app.store.read_log(0, 10) == []


@pytest.mark.parametrize(
    ("raised", "cause"),
    [
        (
            DatasourceError("x", reason=ConnectFailure.AUTHENTICATION_FAILED),
            "authentication failed",
        ),
        (DatasourceError("x", reason=ConnectFailure.REFUSED), "the connection was refused"),
        (TimeoutError(), "the connection timed out"),
    ],
)
async def test_an_unreachable_connection_is_refused_with_the_cause_the_test_route_gives(
    app, monkeypatch, raised, cause
):
    await app.connection()

    async def failing(endpoint, timeout):
        raise raised

    monkeypatch.setattr(app.reader, "test", failing)
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    assert (caught.value.code, caught.value.message) == (
        "FET-1040",
        f"Connection 'pgsql' is not available: {cause}",
    )


async def test_a_connection_test_that_passed_lately_stands_for_the_next_jobs(app):
    await app.connection()
    mapped = {"pgsql": {"accounts": ["id"]}}
    assert (await app.request_job(mapped, None, {**SOURCE, "n": "1"}, tenant=SINGLE_TENANT)).created
    app.reader.database("db.local", "pgsql").fail_connect = True

    # Within CONNECTION_CHECK_CACHE_SECONDS (5 s by default) the earlier success stands.
    app.clock.advance(seconds=4)
    assert (await app.request_job(mapped, None, {**SOURCE, "n": "2"}, tenant=SINGLE_TENANT)).created

    app.clock.advance(seconds=2)
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job(mapped, None, {**SOURCE, "n": "3"}, tenant=SINGLE_TENANT)
    assert caught.value.code == "FET-1040"


async def test_end_to_end_on_twins_result_decrypts_and_matches_hmac(app):
    await app.connection()
    job = (
        await app.request_job(
            {"pgsql": {"accounts": ["*"], "empty": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    ).job
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    await app.emitter.run_once()
    [note] = app.publisher.published
    assert note.status == "completed"
    blob = app.storage.objects[f"external-data/{job.id}.json"]
    keys = app.ring.current
    import json

    body = json.loads(note.body)
    plaintext = open_result(blob, keys.storage, keys.external_hmac, body["result"]["hmac"])
    assert json.loads(plaintext) == {
        "pgsql": {"accounts": [{"id": i, "name": f"n{i}"} for i in range(1, 6)]}
    }
    assert body["result"]["rowCount"] == 5
    assert body["result"]["sizeBytes"] == len(plaintext)


async def _with_known_schema(app):
    from adapters.memory.schema_cache import InMemorySchemaCache
    from application.ports.schema_cache import SchemaKey
    from domain.schema import Column, Schema, Table

    connection = await app.connection()
    cache = InMemorySchemaCache()
    table = Table(None, "accounts", (Column("id", "integer"), Column("name", "text")))
    await cache.put(
        SchemaKey(connection.id, connection.version, ("public",), tenant=SINGLE_TENANT),
        Schema({"accounts": table}),
    )
    app.request_job.schemas = cache


@pytest.mark.parametrize(
    ("mapped", "filters", "fragment"),
    [
        ({"pgsql": {"ghost": ["id"]}}, None, "table 'ghost' not found in datasource 'pgsql'"),
        (
            {"pgsql": {"accounts": ["id", "nope"]}},
            None,
            "field 'nope' not found in 'pgsql.accounts'",
        ),
        (
            {"pgsql": {"accounts": ["id"]}},
            {"pgsql": {"accounts": {"nope": {"eq": [1]}}}},
            "filter on field 'nope' (operator 'eq') of table 'accounts' in datasource 'pgsql'",
        ),
        (
            {"pgsql": {"accounts": ["id"]}},
            {"pgsql": {"other": {"id": {"gt": [1]}}}},
            "of table 'other' in datasource 'pgsql'",
        ),
    ],
)
async def test_request_is_checked_against_a_known_schema(app, mapped, filters, fragment):
    await _with_known_schema(app)
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job(mapped, filters, SOURCE, tenant=SINGLE_TENANT)
    assert caught.value.code == "FET-0401"
    assert fragment in caught.value.message
    assert await app.store.read_log(0, 10) == []


@pytest.mark.parametrize(
    ("mapped", "suggestion"),
    [
        (
            {"pgsql": {"acounts": ["id"]}},
            "table 'acounts' not found in datasource 'pgsql' (did you mean 'accounts'?)",
        ),
        (
            {"pgsql": {"accounts": ["Nmae"]}},
            "field 'Nmae' not found in 'pgsql.accounts' (did you mean 'name'?)",
        ),
    ],
)
async def test_an_unknown_table_or_field_is_refused_with_the_closest_names(app, mapped, suggestion):
    await _with_known_schema(app)
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job(mapped, None, SOURCE, tenant=SINGLE_TENANT)
    assert suggestion in caught.value.message


def test_no_suggestion_when_nothing_is_close():
    from application.jobs.extraction_plan import did_you_mean

    assert did_you_mean("zzz", ["accounts", "orders"]) == ""
    assert did_you_mean("ORDER", ["accounts", "Orders"]) == " (did you mean 'Orders'?)"


async def test_valid_request_passes_a_known_schema_and_an_unknown_scope_is_discovered_now(app):
    await _with_known_schema(app)
    ok = await app.request_job(
        {"pgsql": {"accounts": ["*"]}},
        {"pgsql": {"accounts": {"id": {"gt": [1]}}}},
        SOURCE,
        tenant=SINGLE_TENANT,
    )
    assert ok.created
    # Scope ('sales',) was never discovered: it is now, and the request is refused.
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job(
            {"pgsql": {"sales.orders": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    assert "not found in datasource 'pgsql'" in caught.value.message


async def test_an_unknown_table_is_refused_at_submission_without_a_cached_schema(app):
    """Nothing discovered yet: the submission discovers the schema, refuses the misspelt
    table with the closest name, records nothing, and keeps the schema for the next one."""
    await app.connection()
    with pytest.raises(InvalidRequest) as caught:
        await app.request_job({"pgsql": {"acounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    assert caught.value.code == "FET-0401"
    assert "(did you mean 'accounts'?)" in caught.value.message
    assert await app.store.read_log(0, 10) == []
    discovered = app.reader.discover

    async def not_again(endpoint, scope):
        raise AssertionError("the schema was discovered again")

    app.reader.discover = not_again
    try:
        ok = await app.request_job(
            {"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    finally:
        app.reader.discover = discovered
    assert ok.created


async def test_a_schema_that_cannot_be_read_at_submission_is_left_to_the_worker(app):
    """Discovery failing at submission (the connection test passed) does not refuse the job:
    the worker reads the schema when it runs, and fails the job if it still cannot find it."""
    await app.connection()
    discover = app.reader.discover

    async def failing(endpoint, scope):
        raise DatasourceError("failed to discover datasource schema", stage="discover")

    app.reader.discover = failing
    try:
        created = await app.request_job(
            {"pgsql": {"acounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT
        )
    finally:
        app.reader.discover = discover
    assert created.created
    await app.run_job(created.job.id, tenant=SINGLE_TENANT)
    *_, failed = await app.store.job_events(created.job.id)
    assert isinstance(failed, JobFailed) and "acounts" in failed.error
