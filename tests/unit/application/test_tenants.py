"""Multi-tenant isolation in the use cases, wired by ``bootstrap`` on the in-memory twins: each
use case takes the tenant, and another tenant's connections and jobs are as missing as
unknown ones."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from application.connections.commands.check_connection import limiter_key
from application.connections.directory import internal_id
from application.connections.queries.list_connections import ListFilter
from application.ports.messaging import Settlement
from domain.connection import Connection
from domain.connection_input import ConnectionInput
from domain.errors import FetcherError
from domain.job import JobRequested, JobResultStored
from domain.tenant import SINGLE_TENANT, Tenant
from entrypoints.composition import bootstrap
from entrypoints.roles import ConnectionServices
from tests.support.twins import App, in_memory_settings

A, B = Tenant("tenant-a"), Tenant("tenant-b")
SOURCE = {"source": "payments"}
LEDGER = {
    "DATASOURCE_LEDGER_CONFIG_NAME": "ledger",
    "DATASOURCE_LEDGER_TYPE": "postgresql",
    "DATASOURCE_LEDGER_HOST": "db.local",
    "DATASOURCE_LEDGER_DATABASE": "pgsql",
    "DATASOURCE_LEDGER_TENANTS": "tenant-a",
}


@pytest.fixture
async def mt(app: App, tmp_path: Path) -> AsyncIterator[App]:
    """The ``app`` fixture's adapters, wired in multi-tenant mode with one internal datasource
    that only tenant A sees."""
    settings = in_memory_settings(
        tmp_path, MULTI_TENANT_ENABLED="true", FETCHER_SSRF_GUARD="false", **LEDGER
    )
    async with bootstrap(settings, overrides=app.overrides()) as fetcher:
        app.fetcher = fetcher
        yield app


def services(app: App) -> ConnectionServices:
    return app.fetcher.api.connections


async def register(app: App, tenant: Tenant, name: str = "pgsql", product: str = "payments"):
    return await services(app).register(
        product,
        ConnectionInput(
            config_name=name,
            type="POSTGRESQL",
            host="db.local",
            port=5432,
            database_name="pgsql",
            user_name="reader",
            password="s3cret",
        ),
        tenant=tenant,
    )


async def raises(awaitable, code: str) -> FetcherError:
    with pytest.raises(FetcherError) as caught:
        await awaitable
    assert caught.value.code == code, (caught.value.code, caught.value.message)
    return caught.value


async def test_config_names_are_unique_per_tenant(mt):
    in_a = await register(mt, A)
    in_b = await register(mt, B)
    assert in_a.id != in_b.id and (in_a.tenant, in_b.tenant) == (A, B)
    await raises(register(mt, A), "FET-1002")


async def test_another_tenants_connection_is_missing_to_every_connection_use_case(mt):
    theirs = await register(mt, B)
    unowned = await register(mt, B, "unowned", product="")
    connections = services(mt)
    await raises(connections.get(theirs.id, tenant=A), "FET-1001")
    await raises(connections.update(theirs.id, ConnectionInput(port=1), tenant=A), "FET-1001")
    await raises(connections.remove(theirs.id, tenant=A), "FET-1001")
    await raises(connections.check(theirs.id, tenant=A), "FET-1001")
    await raises(connections.schema(theirs.id, tenant=A), "FET-1001")
    await raises(connections.assign(unowned.id, "payments", tenant=A), "FET-1001")
    await raises(
        connections.get(theirs.id, tenant=SINGLE_TENANT), "FET-1001"
    )  # nor the single tenant's
    assert await connections.get(theirs.id, tenant=B) == theirs
    assert (await connections.get(unowned.id, tenant=B)).product_name == ""
    assert (await connections.check(theirs.id, tenant=B)).latency_ms >= 0


async def test_lists_show_only_the_tenants_own_connections(mt):
    await register(mt, A, "mine")
    await register(mt, B, "theirs")
    await register(mt, B, "theirs_unowned", product="")
    connections = services(mt)

    def names(page) -> list[str]:
        return [c.config_name for c in page.items]

    assert names(await connections.list(ListFilter(), tenant=A)) == ["ledger", "mine"]
    assert names(await connections.list(ListFilter(), tenant=B)) == [
        "theirs_unowned",
        "theirs",
    ]
    assert (await connections.list(ListFilter(), tenant=A)).total == 2
    assert names(await connections.list_unassigned(ListFilter(), tenant=A)) == []
    assert names(await connections.list_unassigned(ListFilter(), tenant=B)) == ["theirs_unowned"]


async def test_validate_schema_treats_another_tenants_name_as_unknown(mt):
    await register(mt, A, "mine")
    await register(mt, B, "theirs")
    validate = services(mt).validate_schema
    await raises(validate({"theirs": {"accounts": ["id"]}}, tenant=A), "FET-1062")
    issues = await validate({"mine": {"accounts": ["id"]}, "theirs": {"t": ["a"]}}, tenant=A)
    assert [(i.type.value, i.data_source) for i in issues] == [("DATA_SOURCE_NOT_FOUND", "theirs")]
    assert await validate({"theirs": {"accounts": ["id"]}}, tenant=B) == []


async def test_a_job_naming_another_tenants_connection_fails_as_unknown_datasource(mt):
    await register(mt, B, "theirs")
    error = await raises(
        mt.request_job({"theirs": {"accounts": ["id"]}}, None, SOURCE, tenant=A), "FET-1020"
    )
    assert error.message == (
        "No connections configured for the requested datasources: no connection is named 'theirs'"
    )
    await register(mt, A, "mine")
    error = await raises(
        mt.request_job(
            {"mine": {"accounts": ["id"]}, "theirs": {"t": ["a"]}}, None, SOURCE, tenant=A
        ),
        "FET-1020",
    )
    assert error.message == "No connection configured for datasource 'theirs'"


async def test_identical_requests_of_two_tenants_are_two_jobs(mt):
    await register(mt, A)
    await register(mt, B)
    mapped = {"pgsql": {"accounts": ["id"]}}
    in_a = await mt.request_job(mapped, None, SOURCE, tenant=A)
    in_b = await mt.request_job(mapped, None, SOURCE, tenant=B)
    again = await mt.request_job(mapped, None, SOURCE, tenant=A)
    assert in_a.created and in_b.created and in_a.job.id != in_b.job.id
    assert not again.created and again.job.id == in_a.job.id
    assert (in_a.job.tenant, in_b.job.tenant) == (A, B)
    [requested] = await mt.store.job_events(in_b.job.id)
    assert isinstance(requested, JobRequested) and requested.tenant == "tenant-b"


async def test_another_tenants_job_and_history_are_missing(mt):
    await register(mt, B)
    job = (await mt.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=B)).job
    api = mt.fetcher.api
    await raises(api.get_job(job.id, tenant=A), "FET-1001")
    await raises(api.get_job_history(job.id, tenant=A), "FET-1001")
    await raises(api.get_job(job.id, tenant=SINGLE_TENANT), "FET-1001")
    assert (await api.get_job(job.id, tenant=B)).id == job.id
    [entry] = await api.get_job_history(job.id, tenant=B)
    assert entry.type == "Requested" and entry.facts["tenant"] == "tenant-b"


async def test_a_job_runs_stores_and_announces_as_its_tenant(mt):
    await register(mt, B)
    job = (await mt.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=B)).job
    await mt.dispatcher.run_once()
    [order] = mt.queue.published
    assert order.tenant == B
    assert await mt.run_job(job.id, tenant=B) is Settlement.ACK
    key = f"tenant-b/external-data/{job.id}.json"
    assert list(mt.storage.objects) == [key]
    stored = next(e for e in await mt.store.job_events(job.id) if isinstance(e, JobResultStored))
    assert stored.path == key
    assert (await mt.fetcher.api.get_job(job.id, tenant=B)).result.path == key
    await mt.emitter.run_once()
    [notification] = mt.publisher.published
    assert notification.tenant == B
    assert json.loads(notification.body)["result"]["path"] == key


async def test_a_work_order_naming_another_tenant_is_dropped_without_a_claim(mt, caplog):
    await register(mt, B)
    job = (await mt.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=B)).job
    assert await mt.run_job(job.id, tenant=A) is Settlement.ACK
    # no tenant header: the single tenant
    assert await mt.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    assert [type(e) for e in await mt.store.job_events(job.id)] == [JobRequested]
    # Another tenant's job is unknown to the order, as a job that does not exist is.
    dropped = [r for r in caplog.records if r.getMessage() == "job.unknown"]
    assert [r.order_tenant for r in dropped] == [  # type: ignore[attr-defined]
        "tenant-a",
        "single-tenant",
    ]


async def test_the_job_gate_counts_only_the_tenants_own_jobs(mt):
    mine = await register(mt, A)
    theirs = await register(mt, B)
    await mt.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=A)
    connections = services(mt)
    await raises(connections.update(mine.id, ConnectionInput(port=6543), tenant=A), "FET-1021")
    changed = await connections.update(theirs.id, ConnectionInput(port=6543), tenant=B)
    assert changed.port == 6543 and changed.tenant == B
    await connections.remove(theirs.id, tenant=B)
    await raises(connections.get(theirs.id, tenant=B), "FET-1001")
    assert await connections.get(mine.id, tenant=A) == mine


async def test_connection_tests_are_rate_limited_per_tenant_and_connection(mt):
    mine = await register(mt, A)
    check = services(mt).check
    assert limiter_key(mine.id, SINGLE_TENANT) == str(mine.id)
    assert limiter_key(mine.id, A) == f"tenant:tenant-a:{mine.id}"
    for _ in range(10):
        await check(mine.id, tenant=A)
    await raises(check(mine.id, tenant=A), "FET-1043")
    assert await check.limiter.acquire(limiter_key(mine.id, B)) == 0.0


async def test_internal_datasources_are_seen_by_the_tenants_listed_under_their_own_ids(mt):
    connections = services(mt)
    a_id, b_id = internal_id("ledger", "tenant-a"), internal_id("ledger", "tenant-b")
    found: Connection = await connections.get(a_id, tenant=A)
    assert (found.config_name, found.internal, found.tenant) == ("ledger", True, A)
    await raises(connections.get(internal_id("ledger"), tenant=A), "FET-1001")
    await raises(connections.get(b_id, tenant=B), "FET-1001")
    await raises(connections.get(a_id, tenant=B), "FET-1001")
    await raises(
        connections.get(internal_id("ledger"), tenant=SINGLE_TENANT), "FET-1001"
    )  # the single tenant
    assert (await connections.list(ListFilter(), tenant=B)).items == []
    created = await mt.request_job({"ledger": {"accounts": ["id"]}}, None, SOURCE, tenant=A)
    await raises(
        mt.request_job({"ledger": {"accounts": ["id"]}}, None, SOURCE, tenant=B), "FET-1020"
    )
    assert await mt.run_job(created.job.id, tenant=A) is Settlement.ACK
    assert (await mt.fetcher.api.get_job(created.job.id, tenant=A)).status == "completed"
