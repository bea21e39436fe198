"""Register, update, remove, assign and test connections, on the in-memory twins."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import replace
from uuid import UUID, uuid4

import pytest

from adapters.security.host_guard import NetworkHostGuard
from application.connection_directory import internal_id
from application.errors import ConnectFailure, DatasourceUnavailable, ForbiddenHost
from domain.connection import Connection, DatabaseType, InternalCredentials
from domain.connection_input import ConnectionInput, SslInput
from domain.errors import FetcherError
from tests.support.connection_kit import make_kit, pg_input

SOURCE = {"source": "payments"}
PRODUCT = "payments"


@pytest.fixture
def kit(app):
    return make_kit(app)


def fails(code: str, message: str | None = None):
    class Matcher:
        def __eq__(self, error: object) -> bool:
            return (
                isinstance(error, FetcherError)
                and error.code == code
                and (message is None or error.message == message)
            )

    return Matcher()


async def raises(awaitable, code: str, message: str | None = None) -> FetcherError:
    with pytest.raises(FetcherError) as caught:
        await awaitable
    assert caught.value.code == code, (caught.value.code, caught.value.message)
    if message is not None:
        assert caught.value.message == message
    return caught.value


# --- register -------------------------------------------------------------------------------


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


# --- update ---------------------------------------------------------------------------------


async def test_update_replaces_scalars_bumps_the_version_and_keeps_the_product(kit, app):
    created = await kit.services.register(PRODUCT, pg_input(metadata={"a": 1, "b": 2}))
    app.clock.advance(minutes=1)
    changed = await kit.services.update(
        created.id,
        ConnectionInput(host=" db2.local ", port=6543, metadata={"c": 3}, schema="sales"),
    )
    assert (changed.host, changed.port, changed.schema) == ("db2.local", 6543, "sales")
    assert changed.metadata == {"c": 3}
    assert changed.version == created.version + 1
    assert changed.updated_at == app.clock.now() and changed.created_at == created.created_at
    assert changed.product_name == PRODUCT and changed.password == created.password
    assert await app.repository.get(created.id) == changed


async def test_update_replaces_the_whole_ssl_block_and_ignores_one_without_mode(kit, app):
    created = await kit.services.register(
        PRODUCT, pg_input(ssl=SslInput(mode="verify-full", ca="CA1", cert="C1", key="K1"))
    )
    same = await kit.services.update(created.id, ConnectionInput(ssl=SslInput(ca="CA2")))
    assert same.ssl == created.ssl
    changed = await kit.services.update(
        created.id, ConnectionInput(ssl=SslInput(mode="verify-ca", ca="CA2"))
    )
    cipher = app.request_job.endpoints.cipher
    assert changed.ssl.mode == "verify-ca" and cipher.open(changed.ssl.ca) == "CA2"
    assert changed.ssl.cert is None and changed.ssl.key is None


async def test_update_seals_a_new_password(kit, app):
    created = await kit.services.register(PRODUCT, pg_input())
    changed = await kit.services.update(created.id, ConnectionInput(password="n3w @:/?# pw"))
    assert changed.password != created.password
    assert app.request_job.endpoints.cipher.open(changed.password) == "n3w @:/?# pw"


async def test_update_checks_the_patched_connection_as_a_whole(kit):
    created = await kit.services.register(PRODUCT, pg_input(ssl=SslInput(mode="verify-full")))
    error = await raises(kit.services.update(created.id, ConnectionInput(type="mysql")), "FET-0001")
    assert "FET-0413" in error.fields["ssl.mode"]
    error = await raises(kit.services.update(created.id, ConnectionInput(host="")), "FET-0402")
    assert error.fields == {"host": "host is a required field"}


async def test_update_errors(kit):
    first = await kit.services.register(PRODUCT, pg_input("first"))
    await kit.services.register(PRODUCT, pg_input("second"))
    await raises(kit.services.update(first.id, ConnectionInput()), "FET-0001", "empty request body")
    await raises(kit.services.update(uuid4(), ConnectionInput(port=1)), "FET-1001")
    await raises(kit.services.update(first.id, ConnectionInput(config_name="second")), "FET-1002")
    await raises(kit.services.update(first.id, ConnectionInput(port=0)), "FET-0001")


async def test_update_and_remove_are_refused_while_a_job_uses_the_connection(kit, app):
    await app.connection()
    created = (await app.repository.by_config_names(["pgsql"]))["pgsql"]
    job = (await app.request_job({"pgsql": {"accounts": ["id"]}}, None, SOURCE)).job
    await kit.project_jobs()
    await raises(
        kit.services.update(created.id, ConnectionInput(port=1)),
        "FET-1021",
        "cannot update connection with active jobs",
    )
    await raises(
        kit.services.remove(created.id), "FET-1021", "cannot delete connection with active jobs"
    )
    await app.run_job(job.id)
    await kit.project_jobs()
    assert (await kit.services.update(created.id, ConnectionInput(port=1))).port == 1
    await kit.services.remove(created.id)


async def test_update_and_remove_drop_the_cached_schemas(kit, app):
    created = await kit.services.register(PRODUCT, pg_input())
    await kit.services.validate_schema({"pgsql": {"accounts": ["id"]}})
    assert len(kit.cache) == 1
    await kit.services.update(created.id, ConnectionInput(port=5433))
    assert len(kit.cache) == 0
    await kit.services.validate_schema({"pgsql": {"accounts": ["id"]}})
    assert len(kit.cache) == 1
    await kit.services.remove(created.id)
    assert len(kit.cache) == 0


# --- remove ---------------------------------------------------------------------------------


async def test_remove_is_soft_and_a_second_remove_is_not_found(kit, app):
    created = await kit.services.register(PRODUCT, pg_input())
    await kit.services.remove(created.id)
    assert await app.repository.get(created.id) is None
    await raises(kit.services.remove(created.id), "FET-1001")


async def test_internal_datasources_cannot_be_changed_or_removed(app):
    ledger = _internal("ledger")
    kit = make_kit(app, internal={"ledger": ledger})
    await raises(kit.services.remove(ledger.id), "FET-1001")
    await raises(kit.services.update(ledger.id, ConnectionInput(port=1)), "FET-1001")
    await raises(kit.services.assign(ledger.id, PRODUCT), "FET-1001")


# --- assign ---------------------------------------------------------------------------------


async def _unowned(app, name: str = "legacy") -> Connection:
    created = await app.connection(name)
    legacy = replace(created, id=uuid4(), config_name=f"{name}_2", product_name="")
    await app.repository.add(legacy)
    return legacy


async def test_assign_gives_an_unowned_connection_a_product_once(kit, app):
    legacy = await _unowned(app)
    assigned = await kit.services.assign(legacy.id, "billing")
    assert assigned.product_name == "billing" and assigned.version == legacy.version + 1
    await raises(
        kit.services.assign(legacy.id, "other"),
        "FET-1015",
        "The connection is already assigned to a product and cannot be reassigned.",
    )
    await raises(kit.services.assign(uuid4(), "billing"), "FET-1001")


async def test_of_concurrent_assigns_exactly_one_wins(kit, app):
    legacy = await _unowned(app)
    outcomes = await asyncio.gather(
        *(kit.services.assign(legacy.id, f"p{i}") for i in range(10)), return_exceptions=True
    )
    winners = [o for o in outcomes if isinstance(o, Connection)]
    assert len(winners) == 1
    assert all(o == fails("FET-1015") for o in outcomes if o not in winners)


# --- test (connectivity) --------------------------------------------------------------------


async def test_check_dials_with_the_opened_password_and_reports_latency(kit):
    created = await kit.services.register(PRODUCT, pg_input())
    result = await kit.services.check(created.id)
    assert result.latency_ms >= 0
    assert kit.reader.endpoints[-1].password == "s3cret p@ss:/?#"


async def test_check_is_limited_to_ten_a_minute_per_connection(kit):
    created = await kit.services.register(PRODUCT, pg_input())
    other = await kit.services.register(PRODUCT, pg_input("other"))
    for _ in range(10):
        await kit.services.check(created.id)
    error = await raises(
        kit.services.check(created.id),
        "FET-1043",
        "Connection test limit reached. Try again in 6 seconds.",
    )
    assert error.title == "Rate Limit Exceeded"
    await kit.services.check(other.id)
    kit.ticks.value += 5.5
    await raises(
        kit.services.check(created.id),
        "FET-1043",
        "Connection test limit reached. Try again in 1 seconds.",
    )
    kit.ticks.value += 0.5
    await kit.services.check(created.id)


async def test_check_failures(kit, app):
    created = await kit.services.register(PRODUCT, pg_input())
    await raises(kit.services.check(uuid4()), "FET-1001")
    app.reader.database("db.local", "pgsql").fail_connect = True
    error = await raises(kit.services.check(created.id), "FET-1041")
    assert error.title == "Database Connection Error" and error.kind.value == "internal"
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
    error = await raises(kit.services.check(created.id), "FET-1041")
    assert error.message.endswith("Cause: the server certificate could not be verified.")
    kit.reader.errors["test"] = ForbiddenHost()
    await raises(kit.services.check(created.id), "FET-0414")


async def test_internal_datasources_are_testable_with_their_configured_password(app):
    ledger = replace(
        _internal("ledger", host="db.local", database="pgsql"),
        internal_credentials=InternalCredentials("env pw", ssl_ca="CA PEM"),
    )
    kit = make_kit(app, internal={"ledger": ledger})
    await kit.services.check(ledger.id)
    endpoint = kit.reader.endpoints[-1]
    assert (endpoint.password, endpoint.ssl_ca) == ("env pw", "CA PEM")
    assert "env pw" not in repr(ledger) and "CA PEM" not in repr(ledger)


def test_only_internal_datasources_carry_plaintext_credentials():
    with pytest.raises(ValueError, match="internal"):
        replace(_internal("ledger"), internal=False, internal_credentials=InternalCredentials())


def _internal(name: str, host: str = "ledger.db", database: str = "ledger") -> Connection:
    return Connection(
        id=internal_id(name),
        product_name="",
        config_name=name,
        type=DatabaseType.POSTGRESQL,
        host=host,
        port=5432,
        database_name=database,
        user_name="ledger",
        password=None,
        internal=True,
    )


def test_internal_ids_are_uuid5_over_tenant_and_name():
    assert internal_id("midaz_onboarding") == UUID("d23dda0c-5f1a-5d94-a584-ea056a9fa8c1")
    assert internal_id("midaz_onboarding", "t1") != internal_id("midaz_onboarding")
