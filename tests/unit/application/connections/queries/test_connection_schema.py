"""A connection's schema: discovered on demand, failures named by stage."""

from __future__ import annotations

from uuid import uuid4

from adapters.memory.datasource_reader import MemoryTable
from application.errors import DatasourceError, DatasourceUnavailable, ForbiddenHost
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import pg_input, raises

PRODUCT = "payments"


async def test_schema_lists_tables_and_columns_sorted_with_types(kit, app):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    app.reader.database("db.local", "pgsql").tables["accounting.invoices"] = MemoryTable(
        columns=[("total", "numeric"), ("id", "integer")]
    )
    found = await kit.services.schema(created.id, tenant=SINGLE_TENANT)
    assert [t.name for t in found.tables] == ["accounting.invoices", "accounts", "empty"]
    assert [(c.name, c.data_type) for c in found.tables[0].columns] == [
        ("id", "integer"),
        ("total", "numeric"),
    ]
    assert kit.reader.discoveries == 1 and len(kit.cache) == 0


async def test_schema_failures_name_the_stage(kit):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    await raises(kit.services.schema(uuid4(), tenant=SINGLE_TENANT), "FET-1001")
    kit.reader.errors["discover"] = DatasourceUnavailable("failed to connect to datasource")
    await raises(kit.services.schema(created.id, tenant=SINGLE_TENANT), "FET-1041")
    kit.reader.errors["discover"] = DatasourceError("discovery failed", stage="discover")
    await raises(
        kit.services.schema(created.id, tenant=SINGLE_TENANT),
        "FET-1042",
        "Failed to retrieve database schema information.",
    )
    kit.reader.errors["discover"] = ForbiddenHost()
    await raises(kit.services.schema(created.id, tenant=SINGLE_TENANT), "FET-0414")
