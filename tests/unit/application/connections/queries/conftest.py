"""The connection use cases on the twins of the ``app`` fixture, with two internal
datasources: ``ledger`` (PostgreSQL, on the twin's database) and ``crm`` (MongoDB)."""

import pytest

from domain.connection import DatabaseType
from tests.support.connection_kit import Kit, internal_connection, make_kit
from tests.support.twins import App


@pytest.fixture
def kit(app: App) -> Kit:
    ledger = internal_connection("ledger", host="db.local", database="pgsql")
    crm = internal_connection("crm", DatabaseType.MONGODB, host="db.local", database="pgsql")
    return make_kit(app, internal={"ledger": ledger, "crm": crm})
