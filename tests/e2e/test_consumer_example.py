"""The consumer guide's example, run as a reader of the guide runs it: `docs/examples/consumer.py`
(the very file the page includes) against the real RabbitMQ and S3 server, with a real job of
`fetcher api`, `worker` and `relay`; then the guide's CLI steps on the message it saved."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import aio_pika
import pytest

from adapters.storage.s3 import S3ResultStorage, S3Settings
from tests.e2e.conftest import (
    FETCHER,
    MASTER_KEY,
    RABBIT,
    ROOT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    SOURCE_ROWS,
    Processes,
    base_env,
)
from tests.e2e.test_job_flow import register, submit

EXAMPLE = ROOT / "docs" / "examples" / "consumer.py"


def raw_key(kind: str) -> str:
    """`fetcher keys <kind> --raw`, as the guide tells an operator to hand a consumer a key."""
    return subprocess.run(
        [FETCHER, "keys", kind, "--raw"],
        env=base_env(APP_ENC_KEY=MASTER_KEY),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A `fetcher` tool run without the master key: only what is on its command line."""
    return subprocess.run(
        [FETCHER, *args], env=base_env(), capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def consumer_queue(production: Processes):
    name = f"fetcher.e2e.consumer.{uuid.uuid4().hex[:8]}"
    yield name

    async def delete() -> None:
        connection = await aio_pika.connect(RABBIT)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(name)

    asyncio.run(delete())


def test_the_guide_example_verifies_fetches_and_decrypts_a_real_job(
    production: Processes, source_database: str, consumer_queue: str, tmp_path: Path
):
    external, storage_key = raw_key("external-hmac"), raw_key("storage")
    prefix = production.env["OBJECT_STORAGE_KEY_PREFIX"]
    env = base_env(
        FETCHER_EXTERNAL_HMAC_KEY=external,
        FETCHER_STORAGE_KEY=storage_key,
        RABBITMQ_URL=RABBIT,
        RABBITMQ_JOB_EVENTS_EXCHANGE=production.env["RABBITMQ_JOB_EVENTS_EXCHANGE"],
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=prefix,
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
    )
    assert "APP_ENC_KEY" not in env  # the consumer never holds the master key
    saved = tmp_path / "messages"
    saved.mkdir()
    consumer = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--queue", consumer_queue, "--save-messages", str(saved)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(120, consumer.kill)
    watchdog.start()
    summary = None
    try:
        assert consumer.stdout is not None
        assert json.loads(consumer.stdout.readline()) == {"ready": consumer_queue}
        api, auth = production.api_url, production.headers
        register(api, source_database, "consumer_pg", auth)
        job_id = submit(api, {"consumer_pg": {"public.accounts": ["*"]}}, "consumer", auth)
        # other tests' jobs may end meanwhile: the consumer handles theirs too
        for line in consumer.stdout:
            if json.loads(line).get("jobId") == job_id:
                summary = json.loads(line)
                break
    finally:
        watchdog.cancel()
        consumer.send_signal(signal.SIGINT)
        _, err = consumer.communicate(timeout=30)
    assert summary == {
        "eventId": f"fetcher.job.completed.{job_id}",
        "jobId": job_id,
        "status": "completed",
        "rows": {"consumer_pg.accounts": SOURCE_ROWS},
    }, err
    assert consumer.returncode == 130, err  # stopped by the test, not by an error

    # The same with the CLI: the saved message is what `fetcher event verify` reads.
    message_file = saved / f"{job_id}.message.json"
    verified = cli("event", "verify", str(message_file), "--hmac-key", external)
    assert (verified.returncode, verified.stdout.strip()) == (0, "signature valid"), verified.stderr
    message = json.loads(message_file.read_text())
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps({**message, "body": message["body"].replace("completed", "x")}))
    refused = cli("event", "verify", str(tampered), "--hmac-key", external)
    assert refused.returncode == 1 and "signature invalid" in refused.stderr

    body = json.loads(message["body"])
    blob_file = tmp_path / "result.blob"
    blob_file.write_bytes(asyncio.run(read_object(prefix + body["result"]["path"])))
    decrypted = cli(
        "result", "decrypt", str(blob_file), "--event", str(message_file),
        "--storage-key", storage_key, "--hmac-key", external, "--out", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert decrypted.returncode == 0, decrypted.stderr
    assert "HMAC verified" in decrypted.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["consumer_pg"]["accounts"]
    assert len(rows) == SOURCE_ROWS


async def read_object(key: str) -> bytes:
    s3 = await S3ResultStorage.open(
        S3Settings(
            bucket=S3_BUCKET,
            endpoint_url=S3_ENDPOINT,
            access_key_id=S3_ACCESS,
            secret_access_key=S3_SECRET,
            use_path_style=True,
        )
    )
    try:
        return await s3.read(key)
    finally:
        await s3.close()
