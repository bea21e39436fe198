"""Removing a connection: a soft delete; internal datasources cannot be removed."""

from __future__ import annotations

from domain.connection_input import ConnectionInput
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import internal_connection, make_kit, pg_input, raises

PRODUCT = "payments"


async def test_remove_is_soft_and_a_second_remove_is_not_found(kit, app):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    await kit.services.remove(created.id, tenant=SINGLE_TENANT)
    assert await app.repository.get(created.id, tenant=SINGLE_TENANT) is None
    await raises(kit.services.remove(created.id, tenant=SINGLE_TENANT), "FET-1001")


async def test_internal_datasources_cannot_be_changed_or_removed(app):
    ledger = internal_connection("ledger")
    kit = make_kit(app, internal={"ledger": ledger})
    await raises(kit.services.remove(ledger.id, tenant=SINGLE_TENANT), "FET-1001")
    await raises(
        kit.services.update(ledger.id, ConnectionInput(port=1), tenant=SINGLE_TENANT), "FET-1001"
    )
    await raises(kit.services.assign(ledger.id, PRODUCT, tenant=SINGLE_TENANT), "FET-1001")
