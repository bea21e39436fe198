"""Reading one connection, stored or internal."""

from __future__ import annotations

from uuid import uuid4

from application.connection_directory import internal_id
from tests.support.connection_kit import pg_input, raises

PRODUCT = "payments"


async def test_get_returns_internal_and_stored_connections(kit):
    created = await kit.services.register(PRODUCT, pg_input())
    assert await kit.services.get(created.id) == created
    assert (await kit.services.get(internal_id("ledger"))).config_name == "ledger"
    await raises(kit.services.get(uuid4()), "FET-1001")
