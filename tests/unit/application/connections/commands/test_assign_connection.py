"""Assigning a product to a connection that has none, once."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from uuid import uuid4

from domain.connection import Connection
from domain.errors import FetcherError
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import raises

PRODUCT = "payments"


def fails(code: str, message: str | None = None):
    class Matcher:
        def __eq__(self, error: object) -> bool:
            return (
                isinstance(error, FetcherError)
                and error.code == code
                and (message is None or error.message == message)
            )

    return Matcher()


async def _unowned(app, name: str = "legacy") -> Connection:
    created = await app.connection(name)
    legacy = replace(created, id=uuid4(), config_name=f"{name}_2", product_name="")
    await app.repository.add(legacy)
    return legacy


async def test_assign_gives_an_unowned_connection_a_product_once(kit, app):
    legacy = await _unowned(app)
    assigned = await kit.services.assign(legacy.id, "billing", tenant=SINGLE_TENANT)
    assert assigned.product_name == "billing" and assigned.version == legacy.version + 1
    await raises(
        kit.services.assign(legacy.id, "other", tenant=SINGLE_TENANT),
        "FET-1015",
        "The connection is already assigned to a product and cannot be reassigned.",
    )
    await raises(kit.services.assign(uuid4(), "billing", tenant=SINGLE_TENANT), "FET-1001")


async def test_of_concurrent_assigns_exactly_one_wins(kit, app):
    legacy = await _unowned(app)
    outcomes = await asyncio.gather(
        *(kit.services.assign(legacy.id, f"p{i}", tenant=SINGLE_TENANT) for i in range(10)),
        return_exceptions=True,
    )
    winners = [o for o in outcomes if isinstance(o, Connection)]
    assert len(winners) == 1
    assert all(o == fails("FET-1015") for o in outcomes if o not in winners)
