"""Reading connections: get, lists with their date window, schema, validate-schema."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime
from uuid import uuid4

import pytest

from adapters.memory.datasource_reader import MemoryTable
from application.connection_directory import internal_id
from application.errors import DatasourceError, DatasourceUnavailable, ForbiddenHost
from application.queries.list_connections import ListFilter, date_window
from domain.connection import Connection, DatabaseType
from domain.connection_input import ConnectionInput
from domain.errors import FetcherError
from tests.support.connection_kit import make_kit, pg_input

PRODUCT = "payments"
TODAY = date(2026, 11, 29)


def _internal(name: str, kind: DatabaseType = DatabaseType.POSTGRESQL) -> Connection:
    return Connection(
        id=internal_id(name),
        product_name="",
        config_name=name,
        type=kind,
        host="db.local",
        port=5432,
        database_name="pgsql",
        user_name="ledger",
        password=None,
        internal=True,
    )


@pytest.fixture
def kit(app):
    return make_kit(
        app,
        internal={"ledger": _internal("ledger"), "crm": _internal("crm", DatabaseType.MONGODB)},
    )


async def raises(awaitable, code: str, message: str | None = None) -> FetcherError:
    with pytest.raises(FetcherError) as caught:
        await awaitable
    assert caught.value.code == code, (caught.value.code, caught.value.message)
    if message is not None:
        assert caught.value.message == message
    return caught.value


def _utc(day: str) -> datetime:
    return datetime.fromisoformat(day + "T00:00:00+00:00")


# --- date window ----------------------------------------------------------------------------


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
def test_date_window(start, end, window):
    assert date_window(start, end, TODAY, 1) == (_utc(window[0]), _utc(window[1]))


def test_date_window_refuses_a_start_after_the_end():
    with pytest.raises(FetcherError) as caught:
        date_window(date(2026, 11, 2), date(2026, 11, 1), TODAY, 1)
    assert caught.value.code == "FET-0409"


# --- get and lists --------------------------------------------------------------------------


async def test_get_returns_internal_and_stored_connections(kit):
    created = await kit.services.register(PRODUCT, pg_input())
    assert await kit.services.get(created.id) == created
    assert (await kit.services.get(internal_id("ledger"))).config_name == "ledger"
    await raises(kit.services.get(uuid4()), "FET-1001")


async def test_list_puts_internal_datasources_first_on_page_one_only(kit):
    for i in range(3):
        await kit.services.register(PRODUCT, pg_input(f"conn_{i}"))
    page1 = await kit.services.list(ListFilter(limit=2))
    assert [c.config_name for c in page1.items] == ["crm", "ledger", "conn_2", "conn_1"]
    assert page1.total == 5
    page2 = await kit.services.list(ListFilter(page=2, limit=2))
    assert [c.config_name for c in page2.items] == ["conn_0"] and page2.total == 3
    ascending = await kit.services.list(ListFilter(descending=False, type="POSTGRESQL"))
    assert [c.config_name for c in ascending.items] == ["ledger", "conn_0", "conn_1", "conn_2"]


async def test_list_filters_by_product_metadata_and_creation_window(kit, app):
    await kit.services.register(PRODUCT, pg_input("old"))
    app.clock.advance(days=40)
    await kit.services.register(PRODUCT, pg_input("team_a", metadata={"team": "a", "n": 1}))
    await kit.services.register("billing", pg_input("team_b", metadata={"team": "b"}))

    def names(page):
        return [c.config_name for c in page.items if not c.internal]

    assert names(await kit.services.list(ListFilter())) == ["team_b", "team_a"]
    assert names(await kit.services.list(ListFilter(product_name=PRODUCT))) == ["team_a"]
    assert names(await kit.services.list(ListFilter(metadata={"team": "b"}))) == ["team_b"]
    assert names(await kit.services.list(ListFilter(metadata={"n": "1"}))) == []
    window = ListFilter(start_date=date(2026, 11, 1), end_date=app.clock.now().date())
    assert names(await kit.services.list(window)) == ["team_b", "team_a"]  # one month at most
    kit.services.list.max_months = 3
    assert names(await kit.services.list(window)) == ["team_b", "team_a", "old"]


async def test_unassigned_lists_only_connections_without_product(kit, app):
    owned = await kit.services.register(PRODUCT, pg_input("owned"))
    await app.repository.add(replace(owned, id=uuid4(), config_name="legacy", product_name=""))
    page = await kit.services.list_unassigned(ListFilter(product_name=PRODUCT))
    assert [c.config_name for c in page.items] == ["legacy"] and page.total == 1


# --- schema ---------------------------------------------------------------------------------


async def test_schema_lists_tables_and_columns_sorted_with_types(kit, app):
    created = await kit.services.register(PRODUCT, pg_input())
    app.reader.database("db.local", "pgsql").tables["accounting.invoices"] = MemoryTable(
        columns=[("total", "numeric"), ("id", "integer")]
    )
    found = await kit.services.schema(created.id)
    assert [t.name for t in found.tables] == ["accounting.invoices", "accounts", "empty"]
    assert [(c.name, c.data_type) for c in found.tables[0].columns] == [
        ("id", "integer"),
        ("total", "numeric"),
    ]
    assert kit.reader.discoveries == 1 and len(kit.cache) == 0


async def test_schema_failures_name_the_stage(kit):
    created = await kit.services.register(PRODUCT, pg_input())
    await raises(kit.services.schema(uuid4()), "FET-1001")
    kit.reader.errors["discover"] = DatasourceUnavailable("failed to connect to datasource")
    await raises(kit.services.schema(created.id), "FET-1041")
    kit.reader.errors["discover"] = DatasourceError("discovery failed", stage="discover")
    await raises(
        kit.services.schema(created.id),
        "FET-1042",
        "Failed to retrieve database schema information.",
    )
    kit.reader.errors["discover"] = ForbiddenHost()
    await raises(kit.services.schema(created.id), "FET-0414")


# --- validate-schema ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mapped", "code", "message"),
    [
        (None, "FET-0402", None),
        ({}, "FET-0401", "mappedFields cannot be empty"),
        (
            {f"d{i}": {"t": ["f"]} for i in range(11)},
            "FET-1061",
            "maximum 10 datasources allowed per validation request",
        ),
        ({" ": {"t": ["f"]}}, "FET-0401", "config name cannot be empty or whitespace-only"),
        (
            {"pgsql": {f"t{i}": ["f"] for i in range(21)}},
            "FET-1061",
            "maximum 20 tables allowed per datasource, got 21 for 'pgsql'",
        ),
        (
            {"pgsql": {"": ["f"]}},
            "FET-0401",
            "table name cannot be empty or whitespace-only in datasource 'pgsql'",
        ),
        (
            {"pgsql": {"t": [f"f{i}" for i in range(51)]}},
            "FET-1061",
            "maximum 50 fields allowed per table, got 51 for 'pgsql.t'",
        ),
        (
            {"pgsql": {"t": ["a", " "]}},
            "FET-0401",
            "field name cannot be empty or whitespace-only in 'pgsql.t'",
        ),
        ({"nowhere": {"t": ["a"]}}, "FET-1062", None),
    ],
)
async def test_validate_schema_request_rules(kit, mapped, code, message):
    await raises(kit.services.validate_schema(mapped), code, message)


async def test_validate_schema_reports_issues_in_a_stable_order(kit, app):
    await kit.services.register(PRODUCT, pg_input())
    await kit.services.register(PRODUCT, pg_input("down", host="down.local"))
    app.reader.database("db.local", "pgsql").tables["docs"] = MemoryTable(
        columns=[("meta.author", "text"), ("id", "integer")]
    )
    issues = await kit.services.validate_schema(
        {
            "zeta": {"t": ["a"]},
            "pgsql": {
                "public.accounts": ["zz", "id", "aa"],
                "missing": ["id"],
                "docs": ["meta", "id", "meta.author", "meta.title"],
                "empty": ["*"],
                "accounts": ["*"],
            },
            "down": {"t": ["a"]},
        }
    )
    assert [(i.type.value, i.data_source, i.table, i.field) for i in issues] == [
        ("DATA_SOURCE_DOWN", "down", "", ""),
        ("FIELD_NOT_FOUND", "pgsql", "docs", "meta.title"),
        ("TABLE_NOT_FOUND", "pgsql", "missing", ""),
        ("FIELD_NOT_FOUND", "pgsql", "public.accounts", "aa"),
        ("FIELD_NOT_FOUND", "pgsql", "public.accounts", "zz"),
        ("DATA_SOURCE_NOT_FOUND", "zeta", "", ""),
    ]


async def test_validate_schema_accepts_the_wildcard_and_internal_datasources(kit):
    assert (
        await kit.services.validate_schema({"ledger": {"accounts": ["*"], "empty": ["id"]}}) == []
    )


async def test_validate_schema_is_cache_first_per_connection_version_and_scope(kit):
    created = await kit.services.register(PRODUCT, pg_input())
    request = {"pgsql": {"accounts": ["id"]}}
    await kit.services.validate_schema(request)
    await kit.services.validate_schema(request)
    assert kit.reader.discoveries == 1
    await kit.services.validate_schema({"pgsql": {"sales.orders": ["id"]}})
    assert kit.reader.discoveries == 2  # another scope
    await kit.services.update(created.id, ConnectionInput(port=5433))
    await kit.services.validate_schema(request)
    assert kit.reader.discoveries == 3  # another version
    kit.ticks.value += 301
    await kit.services.validate_schema(request)
    assert kit.reader.discoveries == 4  # expired


async def test_validate_schema_aborts_when_the_guard_refuses_a_host(kit):
    await kit.services.register(PRODUCT, pg_input())
    kit.reader.errors["discover"] = ForbiddenHost()
    await raises(kit.services.validate_schema({"pgsql": {"accounts": ["id"]}}), "FET-0414")
