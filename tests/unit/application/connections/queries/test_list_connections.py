"""Listing connections: internal datasources first, filters, and the creation-date window."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from application.connections.queries.list_connections import ListFilter, date_window
from domain.errors import FetcherError
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import pg_input

PRODUCT = "payments"
TODAY = date(2026, 11, 29)


def _utc(day: str) -> datetime:
    return datetime.fromisoformat(day + "T00:00:00+00:00")


@pytest.mark.parametrize(
    ("start", "end", "window"),
    [
        (None, None, ("2026-10-30", "2026-11-30")),
        (date(2026, 11, 1), None, ("2026-11-01", "2026-11-02")),
        (None, date(2026, 11, 10), ("2026-10-29", "2026-11-11")),
        (date(2026, 11, 5), date(2026, 11, 5), ("2026-11-05", "2026-11-06")),
        (date(2026, 1, 1), date(2026, 11, 10), ("2026-10-11", "2026-11-11")),
        (date(2026, 2, 1), date(2026, 3, 30), ("2026-02-28", "2026-03-31")),
    ],
)
def test_date_window_defaults_to_the_last_months_and_is_never_wider(start, end, window):
    assert date_window(start, end, TODAY, 1) == (_utc(window[0]), _utc(window[1]))


def test_date_window_refuses_a_start_after_the_end():
    with pytest.raises(FetcherError) as caught:
        date_window(date(2026, 11, 2), date(2026, 11, 1), TODAY, 1)
    assert caught.value.code == "FET-0409"


async def test_list_puts_internal_datasources_first_on_page_one_only(kit):
    for i in range(3):
        await kit.services.register(PRODUCT, pg_input(f"conn_{i}"), tenant=SINGLE_TENANT)
    page1 = await kit.services.list(ListFilter(limit=2), tenant=SINGLE_TENANT)
    assert [c.config_name for c in page1.items] == ["crm", "ledger", "conn_2", "conn_1"]
    assert page1.total == 5
    page2 = await kit.services.list(ListFilter(page=2, limit=2), tenant=SINGLE_TENANT)
    assert [c.config_name for c in page2.items] == ["conn_0"] and page2.total == 3
    ascending = await kit.services.list(
        ListFilter(descending=False, type="POSTGRESQL"), tenant=SINGLE_TENANT
    )
    assert [c.config_name for c in ascending.items] == ["ledger", "conn_0", "conn_1", "conn_2"]


async def test_list_filters_by_product_metadata_and_creation_window(kit, app):
    await kit.services.register(PRODUCT, pg_input("old"), tenant=SINGLE_TENANT)
    app.clock.advance(days=40)
    await kit.services.register(
        PRODUCT, pg_input("team_a", metadata={"team": "a", "n": 1}), tenant=SINGLE_TENANT
    )
    await kit.services.register(
        "billing", pg_input("team_b", metadata={"team": "b"}), tenant=SINGLE_TENANT
    )

    def names(page):
        return [c.config_name for c in page.items if not c.internal]

    assert names(await kit.services.list(ListFilter(), tenant=SINGLE_TENANT)) == [
        "team_b",
        "team_a",
    ]
    assert names(
        await kit.services.list(ListFilter(product_name=PRODUCT), tenant=SINGLE_TENANT)
    ) == ["team_a"]
    assert names(
        await kit.services.list(ListFilter(metadata={"team": "b"}), tenant=SINGLE_TENANT)
    ) == ["team_b"]
    assert (
        names(await kit.services.list(ListFilter(metadata={"n": "1"}), tenant=SINGLE_TENANT)) == []
    )
    window = ListFilter(start_date=date(2026, 11, 1), end_date=app.clock.now().date())
    assert names(await kit.services.list(window, tenant=SINGLE_TENANT)) == [
        "team_b",
        "team_a",
    ]  # one month at most
    kit.services.list.max_months = 3
    assert names(await kit.services.list(window, tenant=SINGLE_TENANT)) == [
        "team_b",
        "team_a",
        "old",
    ]
