"""`fetcher serve` storing its results and audit witnesses in a bucket with S3 Object Lock
(the auditors guide suggests one): such a bucket refuses an upload without ``Content-MD5``, and
the job still completes, its result decrypts, and its checkpoints are witnessed. The bucket is
the S3 test server behind a front that applies Object Lock's upload rule."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.conftest import (
    MASTER_KEY,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    base_env,
    serving,
)
from tests.e2e.test_embedded_default import cli, wait_for_event
from tests.e2e.test_job_flow import register, submit
from tests.integration.conftest import require_listening
from tests.support.nanio import s3_client
from tests.support.results import open_sealed
from tests.support.s3_front import front_thread


def _bucket(endpoint: str, prefix: str) -> dict[str, str]:
    return {
        "OBJECT_STORAGE_ENDPOINT": endpoint,
        "OBJECT_STORAGE_BUCKET": S3_BUCKET,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
        "OBJECT_STORAGE_KEY_PREFIX": prefix,
    }


async def _stored(key: str) -> bytes:
    """The object at ``key``, read from the S3 test server itself."""
    async with s3_client(S3_ENDPOINT, S3_ACCESS, S3_SECRET) as client:
        response = await client.get_object(Bucket=S3_BUCKET, Key=key)
        async with response["Body"] as stream:
            data: bytes = await stream.read()
    return data


async def test_a_job_completes_and_its_checkpoints_are_witnessed_in_a_locked_bucket(
    tmp_path_factory: pytest.TempPathFactory, source_database: str, tmp_path: Path
) -> None:
    require_listening(S3_ENDPOINT, "the S3 test server")
    target = urlsplit(S3_ENDPOINT)
    prefix = f"locked-{uuid.uuid4().hex[:8]}/"
    with (
        front_thread(target.hostname or "", target.port or 80, object_lock=True) as front,
        serving(
            tmp_path_factory,
            "object-lock",
            **_bucket(front.endpoint, prefix),
            FETCHER_AUDIT_CHECKPOINT_SECONDS="1",
            APP_ENC_KEY=MASTER_KEY,
        ) as processes,
    ):
        data = Path(processes.env["FETCHER_DATA_DIR"])
        register(processes.api_url, source_database, "locked_pg")
        job_id = submit(processes.api_url, {"locked_pg": {"accounts": ["id"]}}, "locked")
        message = wait_for_event(data / "events.jsonl", job_id, processes)
        assert message["routingKey"] == "job.completed", processes.tail()

        key_env = base_env(
            FETCHER_DATA_DIR=str(data),
            APP_ENC_KEY=MASTER_KEY,
            **_bucket(S3_ENDPOINT, prefix),
        )
        deadline = time.monotonic() + 30
        while not httpx.get(f"{processes.api_url}/v1/audit/checkpoints").json()["checkpoints"]:
            assert time.monotonic() < deadline, processes.tail()
            time.sleep(0.5)
        witnessed = cli("audit", "verify", "--witness", "storage", env=key_env)
        while "witnesses: 0" in witnessed.stdout and time.monotonic() < deadline:
            time.sleep(0.5)
            witnessed = cli("audit", "verify", "--witness", "storage", env=key_env)

    assert front.refused, "the bucket never asked for Content-MD5"
    last_refused = max(i for i, (_, had_md5) in enumerate(front.uploads) if not had_md5)
    assert all(had_md5 for _, had_md5 in front.uploads[last_refused + 1 :])
    assert len(front.uploads) > last_refused + 2  # the job's result and witnesses came after
    assert witnessed.returncode == 0, witnessed.stdout + witnessed.stderr
    assert "witnesses: " in witnessed.stdout and "witnesses: 0" not in witnessed.stdout

    body = json.loads(message["body"])
    blob = await _stored(prefix + body["result"]["path"])
    external = cli("keys", "external-hmac", env=key_env).stdout.split()[-1]
    storage_key = cli("keys", "storage", env=key_env).stdout.split()[-1]
    plaintext = open_sealed(
        blob, bytes.fromhex(storage_key), bytes.fromhex(external), body["result"]["hmac"]
    )
    assert json.loads(plaintext)["locked_pg"]["accounts"]
