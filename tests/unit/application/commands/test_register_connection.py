"""Registering a connection: validated, its secrets sealed under the newest key."""

from __future__ import annotations

import pytest

from adapters.security.host_guard import NetworkHostGuard
from domain.connection import DatabaseType
from domain.connection_input import SslInput
from tests.support.connection_kit import make_kit, pg_input, raises

PRODUCT = "payments"


async def test_register_seals_password_and_tls_material_under_the_newest_key(kit, app):
    created = await kit.services.register(
        PRODUCT,
        pg_input(ssl=SslInput(mode="verify-full", ca="CA PEM", cert="CERT PEM", key="KEY PEM")),
    )
    stored = await app.repository.get(created.id)
    assert stored == created and stored.product_name == PRODUCT
    cipher = app.request_job.endpoints.cipher
    secrets = [stored.password, stored.ssl.ca, stored.ssl.cert, stored.ssl.key]
    assert [s.key_version for s in secrets] == ["1"] * 4
    assert [cipher.open(s) for s in secrets] == ["s3cret p@ss:/?#", "CA PEM", "CERT PEM", "KEY PEM"]
    assert "PEM" not in repr(stored) and "s3cret" not in repr(stored)


async def test_register_requires_a_mode_for_an_ssl_block_but_not_a_ca(kit):
    error = await raises(
        kit.services.register(PRODUCT, pg_input(ssl=SslInput(ca="CA"))), "FET-0402"
    )
    assert error.fields == {"ssl.mode": "SSL mode is required"}
    created = await kit.services.register(PRODUCT, pg_input(ssl=SslInput(mode="require")))
    assert created.ssl.mode == "require" and created.ssl.ca is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"ssl": SslInput(mode="true")}, "ssl.mode"),
        ({"host": "bad host!"}, "host"),
        ({"port": 70000}, "port"),
        ({"config_name": "ab"}, "configName"),
        ({"config_name": "no spaces"}, "configName"),
        ({"type": "DB2"}, "type"),
    ],
)
async def test_register_rejects_invalid_fields(kit, changes, field):
    error = await raises(kit.services.register(PRODUCT, pg_input(**changes)), "FET-0001")
    assert set(error.fields) == {field}


async def test_register_refuses_engines_this_build_cannot_read(app):
    kit = make_kit(app)
    kit.services.register.supported = frozenset({DatabaseType.POSTGRESQL})
    error = await raises(kit.services.register(PRODUCT, pg_input(type="MYSQL")), "FET-0001")
    assert error.fields == {"type": "type MYSQL is not supported yet"}


async def test_register_refuses_blocked_ip_literals_when_the_guard_is_on(app):
    kit = make_kit(app, guard=NetworkHostGuard())
    await raises(kit.services.register(PRODUCT, pg_input(host="10.1.2.3")), "FET-0414")
    await raises(kit.services.register(PRODUCT, pg_input(host="::ffff:127.0.0.1")), "FET-0414")
    assert (await kit.services.register(PRODUCT, pg_input(host="db.example.com"))).host
