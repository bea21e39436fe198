"""Registering a connection: validated, its secrets sealed under the newest key."""

from __future__ import annotations

import pytest

from adapters.security.host_guard import NetworkHostGuard
from domain.connection import DatabaseType
from domain.connection_input import SslInput
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import make_kit, pg_input, raises

PRODUCT = "payments"


async def test_register_seals_password_and_tls_material_under_the_newest_key(kit, app):
    created = await kit.services.register(
        PRODUCT,
        pg_input(ssl=SslInput(mode="verify-full", ca="CA PEM", cert="CERT PEM", key="KEY PEM")),
        tenant=SINGLE_TENANT,
    )
    stored = await app.repository.get(created.id, tenant=SINGLE_TENANT)
    assert stored == created and stored.product_name == PRODUCT
    cipher = app.request_job.endpoints.cipher
    secrets = [stored.password, stored.ssl.ca, stored.ssl.cert, stored.ssl.key]
    assert [s.key_version for s in secrets] == ["1"] * 4
    assert [cipher.open(s) for s in secrets] == ["s3cret p@ss:/?#", "CA PEM", "CERT PEM", "KEY PEM"]
    assert "PEM" not in repr(stored) and "s3cret" not in repr(stored)


async def test_register_requires_a_mode_for_an_ssl_block_but_not_a_ca(kit):
    error = await raises(
        kit.services.register(PRODUCT, pg_input(ssl=SslInput(ca="CA")), tenant=SINGLE_TENANT),
        "FET-0402",
    )
    assert error.fields == {"ssl.mode": "SSL mode is required"}
    assert error.entity_type == "connection"
    created = await kit.services.register(
        PRODUCT, pg_input(ssl=SslInput(mode="require")), tenant=SINGLE_TENANT
    )
    assert created.ssl.mode == "require" and created.ssl.ca is None


TYPES = "[ORACLE SQL_SERVER POSTGRESQL MONGODB MYSQL]"
BAD_HOST = "host must be a valid hostname or IP address"
NAME_CHARACTERS = "config name can only contain alphanumeric characters, underscores, and hyphens"
NAME_LENGTH = "config name must be between 3 and 100 characters"
BAD_PG_MODE = (
    "FET-0413 - Invalid SSL mode. The provided SSL mode 'true' is not supported. "
    "Please use a valid SSL mode for this database type."
)
REQUEST = None
MODEL = "connection"


@pytest.mark.parametrize(
    ("changes", "code", "fields", "entity"),
    [
        # the request's own rules: fields as sent, no entity
        ({"host": "bad host!"}, "FET-0001", {"host": BAD_HOST}, REQUEST),
        ({"host": " "}, "FET-0001", {"host": BAD_HOST}, REQUEST),
        ({"port": 70000}, "FET-0001", {"port": "port must be 65535 or less"}, REQUEST),
        ({"port": -1}, "FET-0001", {"port": "port must be 1 or greater"}, REQUEST),
        ({"type": "DB2"}, "FET-0001", {"type": f"type must be one of {TYPES}"}, REQUEST),
        ({"type": "postgresql"}, "FET-0001", {"type": f"type must be one of {TYPES}"}, REQUEST),
        ({"port": 0}, "FET-0402", {"port": "port is a required field"}, REQUEST),
        ({"port": None}, "FET-0402", {"port": "port is a required field"}, REQUEST),
        (
            {"database_name": ""},
            "FET-0402",
            {"databaseName": "databaseName is a required field"},
            REQUEST,
        ),
        # the model's rules: stored names, entity "connection"
        ({"config_name": "ab"}, "FET-0001", {"config_name": NAME_LENGTH}, MODEL),
        ({"config_name": "no spaces"}, "FET-0402", {"config_name": NAME_CHARACTERS}, MODEL),
        ({"config_name": "   "}, "FET-0402", {"config_name": "config name is required"}, MODEL),
        ({"database_name": " "}, "FET-0402", {"database_name": "database name is required"}, MODEL),
        (
            {"user_name": " ", "config_name": " "},
            "FET-0402",
            {"username": "username is required", "config_name": "config name is required"},
            MODEL,
        ),
        ({"ssl": SslInput(mode="true")}, "FET-0001", {"ssl.mode": BAD_PG_MODE}, MODEL),
    ],
)
async def test_register_follows_the_reference_two_rounds_of_rules(
    kit, changes, code, fields, entity
):
    error = await raises(
        kit.services.register(PRODUCT, pg_input(**changes), tenant=SINGLE_TENANT), code
    )
    assert error.fields == fields
    assert error.entity_type == entity


async def test_register_reports_only_the_missing_fields_when_some_are_missing(kit):
    error = await raises(
        kit.services.register(
            PRODUCT, pg_input(type="DB2", port=None, password=""), tenant=SINGLE_TENANT
        ),
        "FET-0402",
    )
    assert error.fields == {
        "port": "port is a required field",
        "password": "password is a required field",
    }


async def test_register_refuses_engines_this_build_cannot_read(app):
    kit = make_kit(app)
    kit.services.register.supported = frozenset({DatabaseType.POSTGRESQL})
    error = await raises(
        kit.services.register(PRODUCT, pg_input(type="MYSQL"), tenant=SINGLE_TENANT), "FET-0001"
    )
    assert error.fields == {"type": "type MYSQL is not supported yet"}


async def test_register_refuses_blocked_ip_literals_when_the_guard_is_on(app):
    kit = make_kit(app, guard=NetworkHostGuard())
    await raises(
        kit.services.register(PRODUCT, pg_input(host="10.1.2.3"), tenant=SINGLE_TENANT), "FET-0414"
    )
    await raises(
        kit.services.register(PRODUCT, pg_input(host="::ffff:127.0.0.1"), tenant=SINGLE_TENANT),
        "FET-0414",
    )
    assert (
        await kit.services.register(PRODUCT, pg_input(host="db.example.com"), tenant=SINGLE_TENANT)
    ).host
