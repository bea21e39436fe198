"""Testing a connection: it dials with the opened credentials, at most ten times a minute."""

from __future__ import annotations

import ssl
from dataclasses import replace
from uuid import uuid4

from application.errors import ConnectFailure, DatasourceUnavailable, ForbiddenHost
from domain.connection import InternalCredentials
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import internal_connection, make_kit, pg_input, raises

PRODUCT = "payments"


async def test_check_dials_with_the_opened_password_and_reports_latency(kit):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    result = await kit.services.check(created.id, tenant=SINGLE_TENANT)
    assert result.latency_ms >= 0
    assert kit.reader.endpoints[-1].password == "s3cret p@ss:/?#"


async def test_check_is_limited_to_ten_a_minute_per_connection(kit):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    other = await kit.services.register(PRODUCT, pg_input("other"), tenant=SINGLE_TENANT)
    for _ in range(10):
        await kit.services.check(created.id, tenant=SINGLE_TENANT)
    error = await raises(
        kit.services.check(created.id, tenant=SINGLE_TENANT),
        "FET-1043",
        "Connection test limit reached. Try again in 6 seconds.",
    )
    assert error.title == "Rate Limit Exceeded"
    await kit.services.check(other.id, tenant=SINGLE_TENANT)
    kit.ticks.value += 5.5
    await raises(
        kit.services.check(created.id, tenant=SINGLE_TENANT),
        "FET-1043",
        "Connection test limit reached. Try again in 1 seconds.",
    )
    kit.ticks.value += 0.5
    await kit.services.check(created.id, tenant=SINGLE_TENANT)


async def test_check_reports_an_unknown_id_a_failed_dial_with_its_cause_and_a_forbidden_host(
    kit, app
):
    created = await kit.services.register(PRODUCT, pg_input(), tenant=SINGLE_TENANT)
    await raises(kit.services.check(uuid4(), tenant=SINGLE_TENANT), "FET-1001")
    app.reader.database("db.local", "pgsql").fail_connect = True
    error = await raises(kit.services.check(created.id, tenant=SINGLE_TENANT), "FET-1041")
    assert error.title == "Database Connection Error" and error.kind.value == "upstream"
    assert error.message == (
        "The adapter failed to connect to the target data source. "
        "Check credentials and network access."
    )
    app.reader.database("db.local", "pgsql").fail_connect = False
    untrusted = DatasourceUnavailable(
        "failed to connect to datasource", reason=ConnectFailure.CERTIFICATE_NOT_VERIFIED
    )
    untrusted.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    kit.reader.errors["test"] = untrusted
    error = await raises(kit.services.check(created.id, tenant=SINGLE_TENANT), "FET-1041")
    assert error.message.endswith("Cause: the server certificate could not be verified.")
    kit.reader.errors["test"] = ForbiddenHost()
    await raises(kit.services.check(created.id, tenant=SINGLE_TENANT), "FET-0414")


async def test_internal_datasources_are_testable_with_their_configured_password(app):
    ledger = replace(
        internal_connection("ledger", host="db.local", database="pgsql"),
        internal_credentials=InternalCredentials("env pw", ssl_ca="CA PEM"),
    )
    kit = make_kit(app, internal={"ledger": ledger})
    await kit.services.check(ledger.id, tenant=SINGLE_TENANT)
    endpoint = kit.reader.endpoints[-1]
    assert (endpoint.password, endpoint.ssl_ca) == ("env pw", "CA PEM")
    assert "env pw" not in repr(ledger) and "CA PEM" not in repr(ledger)
