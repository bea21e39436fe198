"""Reading one connection, stored or internal."""

from __future__ import annotations

from uuid import uuid4

from application.connections.directory import internal_id
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import pg_input, raises

PRODUCT = "payments"


async def test_get_returns_internal_and_stored_connections(kit):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    assert await kit.services.get(created.id, tenant=SINGLE_TENANT) == created
    assert (
        await kit.services.get(internal_id("ledger"), tenant=SINGLE_TENANT)
    ).config_name == "ledger"
    await raises(kit.services.get(uuid4(), tenant=SINGLE_TENANT), "FET-1001")
