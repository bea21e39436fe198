"""The embedded default (`fetcher serve`, nothing configured) passes the same scenario:
SQLite, in-process queue, results in a folder, events in events.jsonl, a generated key."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import FETCHER, SOURCE_ROWS, Processes, base_env, serving
from tests.e2e.test_job_flow import PRODUCT, expected_rows, register, same_row, submit


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with serving(tmp_path_factory, "embedded") as processes:
        yield processes


def wait_for_event(events: Path, job_id: str, processes: Processes, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if events.exists():
            for line in events.read_text().splitlines():
                message = json.loads(line)
                if json.loads(message["body"])["jobId"] == job_id:
                    return message
        time.sleep(0.1)
    raise AssertionError(f"no event for {job_id}:\n{processes.tail()}")


def cli(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FETCHER, *args], env=env, input=stdin, capture_output=True, text=True, check=False
    )


async def test_embedded_default_runs_the_same_scenario(
    embedded: Processes, source_database: str, tmp_path: Path
):
    data = Path(embedded.env["FETCHER_DATA_DIR"])
    serve_log = (embedded.logs / "serve.log").read_text()
    assert "generated a master key" in serve_log
    assert serve_log.count("authentication is off") == 1  # loopback: open, and says so
    key_env = base_env(APP_ENC_KEY=(data / "master.key").read_text().strip())
    external = cli("keys", "external-hmac", env=key_env).stdout.split()[-1]
    storage_key = cli("keys", "storage", env=key_env).stdout.split()[-1]

    register(embedded.api_url, source_database, "emb_pg")
    job_id = submit(embedded.api_url, {"emb_pg": {"accounts": ["*"]}}, "embedded")
    message = wait_for_event(data / "events.jsonl", job_id, embedded)
    assert message["routingKey"] == "job.completed"
    assert message["exchange"] == "fetcher.job.events"
    assert message["headers"]["ce-id"] == f"fetcher.job.completed.{job_id}"

    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(message))
    plain_env = base_env()
    verified = cli("event", "verify", str(event_file), "--hmac-key", external, env=plain_env)
    assert verified.returncode == 0, verified.stderr
    body = json.loads(message["body"])
    blob = data / "objects" / body["result"]["path"]
    decrypted = cli(
        "result",
        "decrypt",
        str(blob),
        "--event",
        str(event_file),
        "--storage-key",
        storage_key,
        "--hmac-key",
        external,
        env=plain_env,
    )
    assert decrypted.returncode == 0, decrypted.stderr
    rows = sorted(json.loads(decrypted.stdout)["emb_pg"]["accounts"], key=lambda r: r["id"])
    want = await expected_rows(source_database)
    assert len(rows) == SOURCE_ROWS
    assert all(same_row(g, w) for g, w in zip(rows, want, strict=True))

    tampered = dict(message, body=message["body"].replace(PRODUCT, "intruder"))
    event_file.write_text(json.dumps(tampered))
    assert (
        cli("event", "verify", str(event_file), "--hmac-key", external, env=plain_env).returncode
        == 1
    )

    # An unknown table is refused at submission (the embedded default discovers the schema);
    # the worker's own failure of a table gone after submission: tests/e2e/test_job_flow.py.
    refused = httpx.post(
        f"{embedded.api_url}/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {"emb_pg": {"no_such_table": ["id"]}}},
            "metadata": {"source": PRODUCT, "tag": "embedded-missing"},
        },
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "FET-0401"
    assert "table 'no_such_table' not found in datasource 'emb_pg'" in refused.json()["message"]


async def test_mongodb_source_through_the_api_with_credentials_and_composed_filters(
    embedded: Processes,
):
    """Against SecantusDB (a MongoDB-protocol emulator): user creation, SCRAM auth, $and of
    operators on one field are mainstream features it implements."""
    import os
    import uuid

    from pymongo import AsyncMongoClient

    url = os.environ.get("FETCHER_TEST_MONGO_URL", "mongodb://127.0.0.1:27018")
    database = f"emb_{uuid.uuid4().hex[:8]}"
    user, password = f"u{uuid.uuid4().hex[:6]}", "p w@:/?#"
    client: AsyncMongoClient = AsyncMongoClient(url, directConnection=True)
    try:
        await client.admin.command("createUser", user, pwd=password, roles=["root"])
        await client[database].people.insert_many(
            [{"name": f"p{i}", "age": i, "tags": ["a"]} for i in range(6)]
        )
        response = httpx.post(
            f"{embedded.api_url}/v1/management/connections",
            headers={"X-Product-Name": PRODUCT},
            json={
                "configName": f"mongo_{database}",
                "type": "MONGODB",
                "host": "127.0.0.1",
                "port": int(url.rsplit(":", 1)[1].split("/")[0]),
                "databaseName": database,
                "userName": user,
                "password": password,
                "metadata": {"directConnection": "true"},
            },
        )
        assert response.status_code == 201, response.text
        job_id = submit_with_filters(
            embedded.api_url,
            {f"mongo_{database}": {"people": ["name", "age"]}},
            {f"mongo_{database}": {"people": {"age": {"gte": [2], "between": [1, 3]}}}},
        )
        data = Path(embedded.env["FETCHER_DATA_DIR"])
        message = wait_for_event(data / "events.jsonl", job_id, embedded)
        assert message["routingKey"] == "job.completed", message["body"]
        key_env = base_env(APP_ENC_KEY=(data / "master.key").read_text().strip())
        from adapters.crypto.keys import KeyRing
        from adapters.crypto.sealing import open_result

        keys = KeyRing(key_env["APP_ENC_KEY"]).current
        body = json.loads(message["body"])
        plain = open_result(
            (data / "objects" / body["result"]["path"]).read_bytes(),
            keys.storage,
            keys.external_hmac,
            body["result"]["hmac"],
        )
        rows = json.loads(plain)[f"mongo_{database}"]["people"]
        assert sorted(r["age"] for r in rows) == [2, 3]
        assert all(set(r) == {"name", "age"} for r in rows)
    finally:
        await client.drop_database(database)
        await client.admin.command("dropUser", user)
        await client.close()


def submit_with_filters(api: str, mapped: dict, filters: dict) -> str:
    response = httpx.post(
        f"{api}/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": mapped, "filters": filters},
            "metadata": {"source": PRODUCT},
        },
    )
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])
