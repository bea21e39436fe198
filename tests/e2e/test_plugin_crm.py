"""The CRM plugin's datasource through the real entry point: ``fetcher serve`` with the CRM
plugin's encryption key (and not its hash key), a ``plugin_crm`` connection registered over HTTP
against the MongoDB-protocol server, CRM-shaped collections written by an independent
implementation (``tests/support/crm_plugin.py``)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from pymongo import AsyncMongoClient

from tests.e2e.conftest import Processes, serving
from tests.e2e.test_embedded_default import wait_for_event
from tests.e2e.test_job_flow import PRODUCT
from tests.integration.conftest import require_listening, unique_name
from tests.support.crm_plugin import AES_KEY, ORG_A, ORG_B, drop_database, write_crm_database

URL = os.environ.get("FETCHER_TEST_MONGO_URL", "mongodb://127.0.0.1:27018")
DATABASE = unique_name("fetcher_crm_e2e")
USER, PASSWORD = unique_name("crm_reader"), "crm reader's p@ss"


async def _user(create: bool) -> None:
    client: AsyncMongoClient[dict] = AsyncMongoClient(URL, directConnection=True)
    try:
        if create:
            await client.admin.command("createUser", USER, pwd=PASSWORD, roles=["root"])
        else:
            await client.admin.command("dropUser", USER)
    finally:
        await client.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    require_listening(URL, "the MongoDB-protocol server")
    asyncio.run(write_crm_database(URL, DATABASE))
    asyncio.run(_user(create=True))
    try:
        with serving(
            tmp_path_factory,
            "crm",
            CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM=AES_KEY.hex(),
        ) as processes:
            mongo = urlsplit(URL)
            response = httpx.post(
                f"{processes.api_url}/v1/management/connections",
                headers={"X-Product-Name": PRODUCT},
                json={
                    "configName": "plugin_crm",
                    "type": "MONGODB",
                    "host": mongo.hostname,
                    "port": mongo.port,
                    "databaseName": DATABASE,
                    "userName": USER,
                    "password": PASSWORD,
                    "metadata": {"directConnection": "true"},
                },
            )
            assert response.status_code == 201, response.text
            processes.env["CRM_CONNECTION_ID"] = response.json()["id"]
            yield processes
    finally:
        asyncio.run(drop_database(URL, DATABASE))
        asyncio.run(_user(create=False))


def _submit(api: str, mapped: dict, filters: dict | None = None) -> httpx.Response:
    request: dict = {"mappedFields": {"plugin_crm": mapped}}
    if filters:
        request["filters"] = {"plugin_crm": filters}
    return httpx.post(
        f"{api}/v1/fetcher",
        json={"dataRequest": request, "metadata": {"source": PRODUCT}},
        timeout=30,
    )


def test_a_job_reads_the_logical_collection_decrypted(served: Processes) -> None:
    response = _submit(
        served.api_url,
        {"holders": ["_id", "name", "contact.primary_email"]},
        {"holders": {"type": {"eq": ["NATURAL_PERSON"]}}},
    )
    assert response.status_code == 202, response.text
    job_id = str(response.json()["jobId"])
    data = Path(served.env["FETCHER_DATA_DIR"])
    message = wait_for_event(data / "events.jsonl", job_id, served)
    assert message["routingKey"] == "job.completed", message["body"]

    from adapters.crypto.keys import KeyRing
    from adapters.crypto.sealing import open_result

    keys = KeyRing((data / "master.key").read_text().strip()).current
    body = json.loads(message["body"])
    plain = open_result(
        (data / "objects" / body["result"]["path"]).read_bytes(),
        keys.storage,
        keys.external_hmac,
        body["result"]["hmac"],
    )
    assert json.loads(plain) == {
        "plugin_crm": {
            "holders": [
                {"_id": p.id, "name": p.name, "contact": {"primary_email": p.email}}
                for p in (ORG_A[0], ORG_B[0])
            ]
        }
    }


def test_a_search_filter_without_the_hash_key_is_refused_at_submission(served: Processes) -> None:
    response = _submit(
        served.api_url, {"holders": ["_id"]}, {"holders": {"document": {"eq": [ORG_A[0].document]}}}
    )
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["code"] == "FET-0057"
    assert "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM" in answer["message"]
    assert ORG_A[0].document not in response.text


def test_the_schema_route_describes_the_logical_collections(served: Processes) -> None:
    connection = served.env["CRM_CONNECTION_ID"]
    response = httpx.get(
        f"{served.api_url}/v1/management/connections/{connection}/schema",
        headers={"X-Product-Name": PRODUCT},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    text = response.text
    assert '"holders"' in text and '"aliases"' in text
    assert "holders_org-a" not in text and "holdersx" not in text
    assert "contact.primary_email" in text


def test_validate_schema_checks_logical_collections_and_dotted_fields(served: Processes) -> None:
    def validate(fields: list[str]) -> httpx.Response:
        return httpx.post(
            f"{served.api_url}/v1/management/connections/validate-schema",
            headers={"X-Product-Name": PRODUCT},
            json={"mappedFields": {"plugin_crm": {"holders": fields}}},
            timeout=30,
        )

    assert validate(["document", "contact.primary_email"]).status_code == 200
    refused = validate(["contact.primary_email", "contact.fax"])
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {"type": "FIELD_NOT_FOUND", "dataSourceId": "plugin_crm", "table": "holders",
         "field": "contact.fax"}
    ]  # fmt: skip
