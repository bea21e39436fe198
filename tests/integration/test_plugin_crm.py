"""The CRM plugin's compatibility path (reference §4.12) against the MongoDB-protocol server on
loopback (SecantusDB): collections shaped as the CRM plugin writes them, their personal fields
encrypted and their search hashes made here with plain ``cryptography`` and ``hmac``, not with
the product's code.

First the reader alone (discovery, prefixed collections, filters, decryption, a wrong key, a
missing prefix), then jobs through the use cases (the result, the size limit, the keys checked
at submission and by the worker).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pymongo import AsyncMongoClient

from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import KeyRing
from adapters.crypto.sealing import AesGcmResultSealer, open_result
from adapters.datasources.mongodb.reader import MongoReader
from adapters.memory.connection_repository import InMemoryConnectionRepository
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.result_storage import InMemoryResultStorage
from adapters.memory.schema_cache import InMemorySchemaCache
from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.errors import DatasourceDataError
from application.jobs.commands.request_job import RequestJob
from application.jobs.commands.run_job import RunJob, RunLimits
from application.jobs.repository import EventSourcedJobs
from domain.connection import Connection, DatabaseType, Endpoint
from domain.crm import CrmKeys
from domain.errors import CrmKeyMissing, InvalidRequest
from domain.job import JobCompleted, JobFailed, JobResultStored
from domain.schema import Schema
from domain.tenant import SINGLE_TENANT, Tenant
from tests.integration.conftest import require_listening, unique_name
from tests.integration.reader_helpers import extract_rows, table_read
from tests.support.crm_plugin import (
    AES_KEY,
    ALIAS,
    HASH_SECRET,
    ORG_A,
    ORG_B,
    drop_database,
    encrypt,
    search,
    write_crm_database,
)

URL = os.environ.get("FETCHER_TEST_MONGO_URL", "mongodb://127.0.0.1:27018")
DATABASE = unique_name("fetcher_crm_test")
MASTER_KEY = base64.b64encode(bytes(range(32))).decode()

KEYS = CrmKeys(hash_key=HASH_SECRET.encode(), encrypt_key=AES_KEY)


@pytest.fixture(scope="module")
def crm_database() -> Iterator[str]:
    require_listening(URL, "the MongoDB-protocol server")
    asyncio.run(write_crm_database(URL, DATABASE))
    yield DATABASE
    asyncio.run(drop_database(URL, DATABASE))


def _endpoint(crm: bool = True) -> Endpoint:
    parts = urlsplit(URL)
    return Endpoint(
        type=DatabaseType.MONGODB, host=parts.hostname or "127.0.0.1", port=parts.port or 27017,
        database_name=DATABASE, user_name="", password="", options={"directConnection": "true"},
        plugin_crm=crm,
    )  # fmt: skip


@pytest.fixture
async def schema(crm_database: str) -> Schema:
    return await MongoReader(crm_keys=KEYS).discover(_endpoint(), ())


async def _rows(
    schema: Schema,
    table: str,
    fields: list[str] | None,
    filters: dict[str, Any] | None = None,
    keys: CrmKeys = KEYS,
) -> list[dict[str, Any]]:
    read = table_read(schema, table, fields, filters)
    return await extract_rows(MongoReader(crm_keys=keys), _endpoint(), read)


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["_id"] for row in rows]


# --- the reader -----------------------------------------------------------------------------


async def test_discovery_describes_the_logical_collections_with_their_dotted_fields(
    schema: Schema,
) -> None:
    assert set(schema.tables) == {"holders", "aliases"}
    holders = {c.name: c.data_type for c in schema.tables["holders"].columns}
    expected = [
        *("_id", "type", "document", "name", "contact", "contact.primary_email"),
        *("banking_details.iban", "natural_person.mother_name", "search.document"),
    ]
    for name in expected:
        assert name in holders, name
    assert holders["contact"] == "object"
    assert holders["contact.primary_email"] == "string"
    aliases = [c.name for c in schema.tables["aliases"].columns]
    assert aliases == ["_id", "holder_id", "account_id"]


async def test_the_collections_of_a_prefix_are_read_in_name_then_id_order(schema: Schema) -> None:
    rows = await _rows(schema, "holders", ["_id", "type"])
    assert _ids(rows) == ["org-a-1", "org-a-2", "org-b-3"]
    assert rows[0] == {"_id": "org-a-1", "type": "NATURAL_PERSON"}
    assert await _rows(schema, "aliases", None) == [ALIAS]


async def test_fields_that_do_not_ask_for_decryption_come_as_stored(schema: Schema) -> None:
    rows = await _rows(schema, "holders", ["_id", "natural_person"])
    stored = rows[0]["natural_person"]["mother_name"]
    assert stored != ORG_A[0].mother
    nonce_and_sealed = base64.b64decode(stored)
    plain = AESGCM(AES_KEY).decrypt(nonce_and_sealed[:12], nonce_and_sealed[12:], None)
    assert plain.decode() == ORG_A[0].mother


async def test_document_name_or_a_dotted_field_decrypts_every_encrypted_field(
    schema: Schema,
) -> None:
    rows = await _rows(
        schema, "holders", ["_id", "document", "contact.primary_email", "natural_person"]
    )
    first, person = rows[0], ORG_A[0]
    assert first == {
        "_id": person.id,
        "document": person.document,
        "contact": {"primary_email": person.email},
        "natural_person": {"mother_name": person.mother, "father_name": ""},
    }
    by_name = await _rows(schema, "holders", ["name"])
    assert [row["name"] for row in by_name] == [p.name for p in [*ORG_A, *ORG_B]]


async def test_the_wildcard_reads_whole_documents_decrypted(schema: Schema) -> None:
    rows = await _rows(schema, "holders", None)
    last, person = rows[-1], ORG_B[0]
    assert last["contact"] == {
        "primary_email": person.email, "secondary_email": person.email2,
        "mobile_phone": person.mobile, "other_phone": person.phone,
    }  # fmt: skip
    assert last["banking_details"] == {"account": person.account, "iban": person.iban}
    assert last["search"]["document"] == search(person.document)  # hashes are not decrypted


@pytest.mark.parametrize("field", list(ORG_A[1].plain))
async def test_each_searched_field_filters_by_its_hash(schema: Schema, field: str) -> None:
    wanted = ORG_A[1]
    rows = await _rows(schema, "holders", ["_id", "type"], {field: {"eq": [wanted.plain[field]]}})
    assert _ids(rows) == [wanted.id]


async def test_in_and_ne_on_a_searched_field_and_a_plain_field_filter(schema: Schema) -> None:
    emails = [ORG_A[0].email, ORG_B[0].email, "nobody@example"]
    rows = await _rows(schema, "holders", ["_id"], {"contact.primary_email": {"in": emails}})
    assert _ids(rows) == ["org-a-1", "org-b-3"]
    rows = await _rows(schema, "holders", ["_id"], {"document": {"ne": [ORG_A[0].document]}})
    assert _ids(rows) == ["org-a-2", "org-b-3"]
    rows = await _rows(schema, "holders", ["_id"], {"type": {"eq": ["LEGAL_PERSON"]}})
    assert _ids(rows) == ["org-a-2"]


async def test_an_operator_a_hash_cannot_answer_is_refused(schema: Schema) -> None:
    with pytest.raises(InvalidRequest, match=r"operator 'like' cannot be answered"):
        await _rows(schema, "holders", ["_id"], {"name": {"like": ["Person%"]}})


async def test_a_value_that_does_not_decrypt_fails_naming_the_field_not_the_value(
    schema: Schema,
) -> None:
    wrong = CrmKeys(hash_key=KEYS.hash_key, encrypt_key=bytes(32))
    with pytest.raises(DatasourceDataError) as caught:
        await _rows(schema, "holders", ["document"], keys=wrong)
    message = caught.value.message
    assert "field 'document'" in message
    assert "'holders_org-a'" in message
    assert "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM" in message
    assert caught.value.category == "precondition"
    stored = await _rows(schema, "holders", ["_id", "natural_person"])
    assert stored[0]["natural_person"]["mother_name"] not in message
    assert AES_KEY.hex() not in message and bytes(32).hex() not in message


async def test_a_prefix_without_collections_is_fet_0059(schema: Schema) -> None:
    gone = table_read(schema, "aliases", ["_id"])
    read = type(gone)(
        result_key="contacts",
        table=type(gone.table)(schema=None, name="contacts", columns=gone.table.columns),
        columns=gone.columns,
        filters={},
    )
    with pytest.raises(DatasourceDataError) as caught:
        await extract_rows(MongoReader(crm_keys=KEYS), _endpoint(), read)
    assert caught.value.message == (
        'FET-0059 - no collections found matching prefix "contacts_" in plugin_crm database'
    )


async def test_another_mongodb_datasource_reads_the_same_collections_as_they_are(
    crm_database: str,
) -> None:
    plain = await MongoReader(crm_keys=KEYS).discover(_endpoint(crm=False), ())
    assert {"holders_org-a", "holders_org-b", "holdersx"} <= set(plain.tables)
    assert "holders" not in plain.tables
    read = table_read(plain, "holders_org-b", ["_id", "document"])
    rows = await extract_rows(MongoReader(crm_keys=KEYS), _endpoint(crm=False), read)
    assert rows[0]["document"] != ORG_B[0].document


# --- jobs through the use cases ---------------------------------------------------------------


@dataclass
class App:
    repository: InMemoryConnectionRepository
    store: InMemoryJobEventStore
    storage: InMemoryResultStorage
    ring: KeyRing
    request_job: RequestJob
    run_job: RunJob

    async def result(self, job_id: Any) -> Any:
        *_, stored, completed = await self.store.job_events(job_id)
        assert isinstance(completed, JobCompleted), completed
        assert isinstance(stored, JobResultStored)
        keys = self.ring.current
        blob = self.storage.objects[stored.path]
        return json.loads(open_result(blob, keys.storage, keys.external_hmac, stored.hmac))

    async def failure(self, job_id: Any) -> str:
        *_, last = await self.store.job_events(job_id)
        assert isinstance(last, JobFailed), last
        assert self.storage.objects == {}
        return last.error


async def _app(
    keys: CrmKeys = KEYS, *, worker_keys: CrmKeys | None = None, max_bytes: int = 1 << 20
) -> App:
    ring = KeyRing(MASTER_KEY)
    cipher = AesGcmCredentialCipher(ring)
    repository = InMemoryConnectionRepository()
    parts = urlsplit(URL)
    now = datetime.now(UTC)
    await repository.add(
        Connection(
            id=uuid4(), product_name="crm", config_name="plugin_crm", type=DatabaseType.MONGODB,
            host=parts.hostname or "127.0.0.1", port=parts.port or 27017,
            database_name=DATABASE, user_name="", password=None, created_at=now, updated_at=now,
            metadata={"directConnection": "true"},
        )
    )  # fmt: skip
    store, storage = InMemoryJobEventStore(), InMemoryResultStorage()
    directory, endpoints = ConnectionDirectory(repository), EndpointFactory(cipher)
    jobs = EventSourcedJobs(store)
    worker = worker_keys or keys

    class Clock:
        def now(self) -> datetime:
            return datetime.now(UTC)

    class Ids:
        def new_id(self) -> Any:
            return uuid4()

    return App(
        repository=repository, store=store, storage=storage, ring=ring,
        request_job=RequestJob(
            jobs, directory, endpoints, MongoReader(crm_keys=keys), Clock(), Ids(),
            schemas=InMemorySchemaCache(60), crm_keys=keys,
        ),
        run_job=RunJob(
            jobs, directory, endpoints, MongoReader(crm_keys=worker),
            AesGcmResultSealer.from_ring(ring), storage, Clock(), "worker-1",
            RunLimits(retry_backoff=0.0, attempts=1, timeout=60, max_result_bytes=max_bytes),
            leases=InMemoryJobIndex(), crm_keys=worker,
        ),
    )  # fmt: skip


@pytest.fixture
async def app(crm_database: str) -> AsyncIterator[App]:
    yield await _app()


async def _run(
    app: App,
    mapped: dict[str, Any],
    filters: dict[str, Any] | None = None,
    tenant: Tenant = SINGLE_TENANT,
) -> Any:
    job = (
        await app.request_job(
            {"plugin_crm": mapped},
            {"plugin_crm": filters} if filters else None,
            {"source": "crm"},
            tenant=tenant,
        )
    ).job
    await app.run_job(job.id, tenant=tenant)
    return job.id


async def test_a_job_reads_logical_collections_decrypted_and_filtered(app: App) -> None:
    job_id = await _run(
        app,
        {"holders": ["_id", "name", "contact.mobile_phone"], "aliases": ["holder_id"]},
        {"holders": {"banking_details.iban": {"in": [ORG_A[0].iban, ORG_B[0].iban]}}},
    )
    result = await app.result(job_id)
    assert result == {
        "plugin_crm": {
            "aliases": [{"holder_id": "org-a-1"}],
            "holders": [
                {"_id": p.id, "name": p.name, "contact": {"mobile_phone": p.mobile}}
                for p in (ORG_A[0], ORG_B[0])
            ],
        }
    }


async def test_an_unknown_logical_collection_is_refused_at_submission(app: App) -> None:
    with pytest.raises(InvalidRequest, match=r"table 'holder' not found .*did you mean 'holders'"):
        await _run(app, {"holder": ["_id"]})


async def test_the_size_limit_holds_on_this_path(crm_database: str) -> None:
    app = await _app(max_bytes=300)
    job_id = await _run(app, {"holders": ["*"]})
    assert (await app.failure(job_id)).endswith(
        "[limit_exceeded] extraction result exceeds the configured size limit"
    )


async def test_a_job_needing_a_missing_key_is_refused_at_submission(crm_database: str) -> None:
    no_keys = await _app(CrmKeys())
    with pytest.raises(CrmKeyMissing) as caught:
        await _run(no_keys, {"holders": ["document"]})
    assert caught.value.code == "FET-0058"
    assert "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM" in caught.value.message
    with pytest.raises(CrmKeyMissing) as caught:
        await _run(no_keys, {"holders": ["_id"]}, {"holders": {"name": {"eq": ["x"]}}})
    assert caught.value.code == "FET-0057"
    assert "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM" in caught.value.message
    # Reading fields that are neither encrypted nor searched needs neither key.
    job_id = await _run(no_keys, {"holders": ["_id", "type"]})
    assert [row["_id"] for row in (await no_keys.result(job_id))["plugin_crm"]["holders"]] == [
        "org-a-1", "org-a-2", "org-b-3",
    ]  # fmt: skip


async def test_the_worker_checks_the_keys_and_names_a_field_that_does_not_decrypt(
    crm_database: str,
) -> None:
    unkeyed_worker = await _app(KEYS, worker_keys=CrmKeys(hash_key=KEYS.hash_key))
    job_id = await _run(unkeyed_worker, {"holders": ["name"]})
    assert await unkeyed_worker.failure(job_id) == (
        "engine extraction: engine: [precondition] FET-0058 - CRM encrypt secret key not "
        "configured (set CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM: reading plugin_crm's document, "
        "name or a dotted field decrypts with it)"
    )
    wrong = await _app(KEYS, worker_keys=CrmKeys(hash_key=KEYS.hash_key, encrypt_key=bytes(16)))
    job_id = await _run(wrong, {"holders": ["name"]})
    error = await wrong.failure(job_id)
    assert error.startswith("engine extraction: engine: [precondition] field 'name' of a document")
    assert "holders_org-a" in error


async def test_each_tenant_reads_its_own_plugin_crm_with_the_deployments_keys(app: App) -> None:
    acme, database = Tenant("acme"), DATABASE + "_acme"
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(URL, directConnection=True)
    try:
        await client[database]["holders_acme"].insert_one(
            {"_id": "acme-1", "name": encrypt("Acme Holder")}
        )
        single = (await app.repository.by_config_names(["plugin_crm"], tenant=SINGLE_TENANT))[
            "plugin_crm"
        ]
        await app.repository.add(replace(single, id=uuid4(), tenant=acme, database_name=database))
        job_id = await _run(app, {"holders": ["_id", "name"]}, tenant=acme)
        assert await app.result(job_id) == {
            "plugin_crm": {"holders": [{"_id": "acme-1", "name": "Acme Holder"}]}
        }
        job_id = await _run(app, {"holders": ["_id"]})
        assert len((await app.result(job_id))["plugin_crm"]["holders"]) == 3
    finally:
        await client.drop_database(database)
        await client.close()
