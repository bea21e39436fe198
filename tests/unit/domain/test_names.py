from __future__ import annotations

import pytest

from domain.connection import DatabaseType as T
from domain.names import discovery_scope, normalise_field, normalise_table


@pytest.mark.parametrize(
    ("db", "name", "key"),
    [
        (T.POSTGRESQL, "public.accounts", "accounts"),
        (T.POSTGRESQL, "Public.accounts", "accounts"),
        (T.POSTGRESQL, "accounts", "accounts"),
        (T.POSTGRESQL, "sales.Orders", "sales.Orders"),
        (T.SQL_SERVER, "dbo.t", "t"),
        (T.SQL_SERVER, "cat.dbo.t", "t"),
        (T.SQL_SERVER, "cat.hr.t", "hr.t"),
        (T.ORACLE, "hr.emp", "HR.EMP"),
        (T.ORACLE, "emp", "EMP"),
        (T.MYSQL, "Orders", "Orders"),
    ],
)
def test_normalised_table_keys(db, name, key):
    assert normalise_table(db, name) == key


def test_field_names_upper_cased_only_on_oracle():
    assert normalise_field(T.ORACLE, "name") == "NAME"
    assert normalise_field(T.POSTGRESQL, "Name") == "Name"


@pytest.mark.parametrize(
    ("db", "names", "scope"),
    [
        (T.POSTGRESQL, ["a", "b"], ("public",)),
        (T.POSTGRESQL, ["sales.a", "b"], ("sales", "public")),
        (T.POSTGRESQL, ["Public.a"], ("public",)),
        (T.POSTGRESQL, ["sales.a", "sales.b"], ("sales",)),
        (T.SQL_SERVER, ["a"], ("dbo",)),
        (T.ORACLE, ["hr.a", "HR.b"], ("HR",)),
        (T.ORACLE, ["a"], ()),
        (T.MYSQL, ["a"], ()),
        (T.MONGODB, ["a"], ()),
    ],
)
def test_discovery_scope_is_the_schemas_the_requested_tables_name(db, names, scope):
    assert discovery_scope(db, names) == scope
