"""Listing the connections no product owns yet."""

from __future__ import annotations

from dataclasses import replace
from uuid import uuid4

from application.connections.queries.list_connections import ListFilter
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import pg_input

PRODUCT = "payments"


async def test_unassigned_lists_only_connections_without_product(kit, app):
    owned = await kit.services.register(PRODUCT, pg_input("owned"), tenant=SINGLE_TENANT)
    await app.repository.add(replace(owned, id=uuid4(), config_name="legacy", product_name=""))
    page = await kit.services.list_unassigned(
        ListFilter(product_name=PRODUCT), tenant=SINGLE_TENANT
    )
    assert [c.config_name for c in page.items] == ["legacy"] and page.total == 1
