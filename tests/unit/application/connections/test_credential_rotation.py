"""Key rotation of stored credentials: old versions stay readable, writes seal anew."""

from __future__ import annotations

import base64
from dataclasses import replace
from uuid import uuid4

import pytest

from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import KeyRing
from application.connections.endpoints import EndpointFactory
from application.errors import CredentialKeyMissing
from application.jobs.commands.request_job import RequestJob
from domain.connection_input import ConnectionInput, SslInput
from domain.tenant import SINGLE_TENANT
from tests.support.connection_kit import make_kit, pg_input
from tests.support.twins import MASTER_KEY

NEW_KEY = base64.b64encode(bytes(range(100, 132))).decode()
MISSING = "credentials are encrypted with key version '1', which is not configured"


def cipher(version: str, key: str, previous: dict[str, str] | None = None):
    return AesGcmCredentialCipher(KeyRing(key, version, previous))


def versions(connection) -> list[str]:
    ssl = connection.ssl
    return [s.key_version for s in (connection.password, ssl.ca, ssl.cert, ssl.key)]


TLS = {"ssl": SslInput(mode="verify-ca", ca="CA", cert="CERT", key="KEY")}


async def test_rotation_reads_old_versions_and_seals_anew_on_write(app):
    v1 = make_kit(app, cipher=cipher("1", MASTER_KEY))
    created = await v1.services.register("payments", pg_input(**TLS), tenant=SINGLE_TENANT)
    assert versions(created) == ["1"] * 4

    rotated = cipher("2", NEW_KEY, {"1": MASTER_KEY})
    v2 = make_kit(app, cipher=rotated)
    await v2.services.check(created.id, tenant=SINGLE_TENANT)  # read under the previous key
    assert v2.reader.endpoints[-1].password == "s3cret p@ss:/?#"
    assert v2.reader.endpoints[-1].ssl_ca == "CA"

    changed = await v2.services.update(
        created.id, ConnectionInput(port=5433), tenant=SINGLE_TENANT
    )  # write
    assert versions(changed) == ["2"] * 4
    assert versions(await app.repository.get(created.id, tenant=SINGLE_TENANT)) == ["2"] * 4

    only_v2 = make_kit(app, cipher=cipher("2", NEW_KEY))  # the old key is retired
    await only_v2.services.check(created.id, tenant=SINGLE_TENANT)
    assert only_v2.reader.endpoints[-1].password == "s3cret p@ss:/?#"
    assert only_v2.reader.endpoints[-1].ssl_key == "KEY"


async def test_assign_also_seals_anew(app):
    v1 = make_kit(app, cipher=cipher("1", MASTER_KEY))
    created = await v1.services.register("payments", pg_input(**TLS), tenant=SINGLE_TENANT)
    legacy = replace(created, id=uuid4(), config_name="legacy", product_name="")
    await app.repository.add(legacy)
    v2 = make_kit(app, cipher=cipher("2", NEW_KEY, {"1": MASTER_KEY}))
    assigned = await v2.services.assign(legacy.id, "billing", tenant=SINGLE_TENANT)
    assert assigned.product_name == "billing" and versions(assigned) == ["2"] * 4


async def test_a_retired_key_version_is_named_not_a_crash(app):
    v1 = make_kit(app, cipher=cipher("1", MASTER_KEY))
    created = await v1.services.register("payments", pg_input(**TLS), tenant=SINGLE_TENANT)
    lost = make_kit(app, cipher=cipher("2", NEW_KEY))

    with pytest.raises(CredentialKeyMissing) as caught:
        await lost.services.check(created.id, tenant=SINGLE_TENANT)
    assert caught.value.message == MISSING and caught.value.version == "1"
    with pytest.raises(CredentialKeyMissing):
        await lost.services.schema(created.id, tenant=SINGLE_TENANT)
    issues = await lost.services.validate_schema(
        {"pgsql": {"accounts": ["id"]}}, tenant=SINGLE_TENANT
    )
    assert [i.type.value for i in issues] == ["DATA_SOURCE_DOWN"]

    request_job = RequestJob(
        app.jobs,
        lost.services.check.directory,
        EndpointFactory(lost.services.check.endpoints.cipher),
        app.reader,
        app.clock,
        app.register.ids,
    )
    with pytest.raises(Exception) as refused:
        await request_job(
            {"pgsql": {"accounts": ["id"]}}, None, {"source": "payments"}, tenant=SINGLE_TENANT
        )
    assert getattr(refused.value, "code", None) == "FET-1040"

    # Writing a new password makes the connection usable again; the TLS material under the
    # retired key stays as it was (it cannot be opened) until it is sent again.
    changed = await lost.services.update(
        created.id, ConnectionInput(password="fresh"), tenant=SINGLE_TENANT
    )
    assert versions(changed) == ["2", "1", "1", "1"]
    changed = await lost.services.update(
        created.id, ConnectionInput(ssl=SslInput(mode="verify-ca", ca="CA2")), tenant=SINGLE_TENANT
    )
    assert [changed.password.key_version, changed.ssl.ca.key_version] == ["2", "2"]
    await lost.services.check(created.id, tenant=SINGLE_TENANT)
    assert lost.reader.endpoints[-1].password == "fresh"
