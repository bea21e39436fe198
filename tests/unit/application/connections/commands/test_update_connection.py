"""Updating a connection: a patch of the stored one, checked as a whole, refused while a job
uses it."""

from __future__ import annotations

from uuid import uuid4

import pytest

from domain.connection_input import ConnectionInput, SslInput
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import pg_input, raises

TYPES = "[ORACLE SQL_SERVER POSTGRESQL MONGODB MYSQL]"
BAD_HOST = "host must be a valid hostname or IP address"

PRODUCT = "payments"
SOURCE = {"source": "payments"}


async def test_update_replaces_scalars_bumps_the_version_and_keeps_the_product(kit, app):
    created = await kit.services.register(
        PRODUCT, pg_input(metadata={"a": 1, "b": 2}), tenant=SINGLE_TENANT
    )
    app.clock.advance(minutes=1)
    changed = await kit.services.update(
        created.id,
        ConnectionInput(host="db2.local", port=6543, metadata={"c": 3}, schema="sales"),
        tenant=SINGLE_TENANT,
    )
    assert (changed.host, changed.port, changed.schema) == ("db2.local", 6543, "sales")
    assert changed.metadata == {"c": 3}
    assert changed.version == created.version + 1
    assert changed.updated_at == app.clock.now() and changed.created_at == created.created_at
    assert changed.product_name == PRODUCT and changed.password == created.password
    assert await app.repository.get(created.id, tenant=SINGLE_TENANT) == changed


async def test_update_replaces_the_whole_ssl_block_and_ignores_one_without_mode(kit, app):
    created = await kit.services.register(
        PRODUCT,
        pg_input(ssl=SslInput(mode="verify-full", ca="CA1", cert="C1", key="K1")),
        tenant=SINGLE_TENANT,
    )
    same = await kit.services.update(
        created.id, ConnectionInput(ssl=SslInput(ca="CA2")), tenant=SINGLE_TENANT
    )
    assert same.ssl == created.ssl
    changed = await kit.services.update(
        created.id, ConnectionInput(ssl=SslInput(mode="verify-ca", ca="CA2")), tenant=SINGLE_TENANT
    )
    cipher = app.request_job.endpoints.cipher
    assert changed.ssl.mode == "verify-ca" and cipher.open(changed.ssl.ca) == "CA2"
    assert changed.ssl.cert is None and changed.ssl.key is None


async def test_update_seals_a_new_password(kit, app):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    changed = await kit.services.update(
        created.id, ConnectionInput(password="n3w @:/?# pw"), tenant=SINGLE_TENANT
    )
    assert changed.password != created.password
    assert app.request_job.endpoints.cipher.open(changed.password) == "n3w @:/?# pw"


async def test_update_checks_the_patched_connection_as_a_whole(kit):
    created = await kit.services.register(
        PRODUCT, pg_input(ssl=SslInput(mode="verify-full")), tenant=SINGLE_TENANT
    )
    error = await raises(
        kit.services.update(created.id, ConnectionInput(type="MYSQL"), tenant=SINGLE_TENANT),
        "FET-0001",
    )
    assert "FET-0413" in error.fields["ssl.mode"] and error.entity_type == "connection"
    error = await raises(
        kit.services.update(created.id, ConnectionInput(host=""), tenant=SINGLE_TENANT), "FET-0402"
    )
    assert error.fields == {"host": "host is required"} and error.entity_type == "connection"
    error = await raises(
        kit.services.update(created.id, ConnectionInput(port=0), tenant=SINGLE_TENANT), "FET-0402"
    )
    assert error.fields == {"port": "port must be a positive integer"}
    error = await raises(
        kit.services.update(created.id, ConnectionInput(type=""), tenant=SINGLE_TENANT), "FET-0001"
    )
    assert error.fields == {"type": "invalid connection type"}


@pytest.mark.parametrize(
    ("patch", "fields"),
    [
        (
            ConnectionInput(config_name="ab"),
            {"configName": "configName must be at least 3 characters in length"},
        ),
        (
            ConnectionInput(config_name="a" * 101),
            {"configName": "configName must be a maximum of 100 characters in length"},
        ),
        (ConnectionInput(type="mysql"), {"type": f"type must be one of {TYPES}"}),
        (ConnectionInput(host=" db2.local "), {"host": BAD_HOST}),
        (ConnectionInput(port=65536), {"port": "port must be 65535 or less"}),
    ],
)
async def test_update_checks_the_sent_fields_first_as_the_reference_request_rules(
    kit, patch, fields
):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    error = await raises(kit.services.update(created.id, patch, tenant=SINGLE_TENANT), "FET-0001")
    assert error.fields == fields and error.entity_type is None


async def test_update_refuses_an_empty_patch_an_unknown_id_a_taken_name_and_a_bad_port(kit):
    first = await kit.services.register(PRODUCT, pg_input("first"), tenant=SINGLE_TENANT)
    await kit.services.register(PRODUCT, pg_input("second"), tenant=SINGLE_TENANT)
    await raises(
        kit.services.update(first.id, ConnectionInput(), tenant=SINGLE_TENANT),
        "FET-0001",
        "empty request body",
    )
    await raises(
        kit.services.update(uuid4(), ConnectionInput(port=1), tenant=SINGLE_TENANT), "FET-1001"
    )
    await raises(
        kit.services.update(first.id, ConnectionInput(config_name="second"), tenant=SINGLE_TENANT),
        "FET-1002",
    )
    await raises(
        kit.services.update(first.id, ConnectionInput(port=-1), tenant=SINGLE_TENANT), "FET-0001"
    )


async def test_update_and_remove_are_refused_while_a_job_uses_the_connection(kit, app):
    await app.connection()
    created = (await app.repository.by_config_names(["pgsql"], tenant=SINGLE_TENANT))["pgsql"]
    job = (
        await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE, tenant=SINGLE_TENANT)
    ).job
    await kit.project_jobs()
    await raises(
        kit.services.update(created.id, ConnectionInput(port=1), tenant=SINGLE_TENANT),
        "FET-1021",
        "cannot update connection with active jobs",
    )
    await raises(
        kit.services.remove(created.id, tenant=SINGLE_TENANT),
        "FET-1021",
        "cannot delete connection with active jobs",
    )
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    await kit.project_jobs()
    assert (
        await kit.services.update(created.id, ConnectionInput(port=1), tenant=SINGLE_TENANT)
    ).port == 1
    await kit.services.remove(created.id, tenant=SINGLE_TENANT)


async def test_update_and_remove_drop_the_cached_schemas(kit, app):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    await kit.services.validate_schema({"pgsql": {"accounts": ["id"]}}, tenant=SINGLE_TENANT)
    assert len(kit.cache) == 1
    await kit.services.update(created.id, ConnectionInput(port=5433), tenant=SINGLE_TENANT)
    assert len(kit.cache) == 0
    await kit.services.validate_schema({"pgsql": {"accounts": ["id"]}}, tenant=SINGLE_TENANT)
    assert len(kit.cache) == 1
    await kit.services.remove(created.id, tenant=SINGLE_TENANT)
    assert len(kit.cache) == 0
