"""Validating requested fields against the datasources' schemas, cache first."""

from __future__ import annotations

import pytest

from adapters.memory.datasource_reader import MemoryTable
from application.errors import ForbiddenHost
from domain.connection_input import ConnectionInput
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import pg_input, raises

PRODUCT = "payments"


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
    await raises(kit.services.validate_schema(mapped, tenant=SINGLE_TENANT), code, message)


async def test_validate_schema_reports_issues_in_a_stable_order(kit, app):
    await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    await kit.services.register(PRODUCT, pg_input("down", host="down.local"), tenant=SINGLE_TENANT)
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
        },
        tenant=SINGLE_TENANT,
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
        await kit.services.validate_schema(
            {"ledger": {"accounts": ["*"], "empty": ["id"]}}, tenant=SINGLE_TENANT
        )
        == []
    )


async def test_validate_schema_is_cache_first_per_connection_version_and_scope(kit):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    request = {"pgsql": {"accounts": ["id"]}}
    await kit.services.validate_schema(request, tenant=SINGLE_TENANT)
    await kit.services.validate_schema(request, tenant=SINGLE_TENANT)
    assert kit.reader.discoveries == 1
    await kit.services.validate_schema({"pgsql": {"sales.orders": ["id"]}}, tenant=SINGLE_TENANT)
    assert kit.reader.discoveries == 2  # another scope
    await kit.services.update(created.id, ConnectionInput(port=5433), tenant=SINGLE_TENANT)
    await kit.services.validate_schema(request, tenant=SINGLE_TENANT)
    assert kit.reader.discoveries == 3  # another version
    kit.ticks.value += 301
    await kit.services.validate_schema(request, tenant=SINGLE_TENANT)
    assert kit.reader.discoveries == 4  # expired


async def test_validate_schema_aborts_when_the_guard_refuses_a_host(kit):
    await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    kit.reader.errors["discover"] = ForbiddenHost()
    await raises(
        kit.services.validate_schema({"pgsql": {"accounts": ["id"]}}, tenant=SINGLE_TENANT),
        "FET-0414",
    )
