"""A consumer of Fetcher's job events: bind a queue, verify each event, fetch and open its result.

Run it with the two keys a consumer is given (never the master key):

    export FETCHER_EXTERNAL_HMAC_KEY=$(fetcher keys external-hmac --raw)  # verifies events, HMACs
    export FETCHER_STORAGE_KEY=$(fetcher keys storage --raw)              # decrypts results
    export RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5672/
    export OBJECT_STORAGE_ENDPOINT=http://127.0.0.1:9100 OBJECT_STORAGE_BUCKET=fetcher-results
    export OBJECT_STORAGE_ACCESS_KEY_ID=... OBJECT_STORAGE_SECRET_KEY=...
    export OBJECT_STORAGE_KEY_PREFIX=          # the prefix the workers write under, if any
    export OBJECT_STORAGE_USE_PATH_STYLE=true  # for MinIO, nanio and other servers by address
    python consumer.py --queue reporting.fetcher-events

It declares a durable queue of its own, binds it to the events exchange for `job.completed`
and `job.failed`, and for each message prints one JSON line: the job, its status, and for a
completed job the number of rows per datasource and table. `--max-messages N` stops after N
messages; `--save-messages DIR` also writes each message as the JSON document that
`fetcher event verify` reads. Needs aio-pika, aiobotocore and cryptography.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import sys
from pathlib import Path
from typing import Any

import aio_pika
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

EVENTS_EXCHANGE = os.environ.get("RABBITMQ_JOB_EVENTS_EXCHANGE", "fetcher.job.events")
NONCE_SIZE = 12


class Rejected(Exception):
    """An event that must not be trusted: its signature or its result does not check out."""


def header_text(value: object) -> str:
    """AMQP header values arrive as byte arrays (the `ce-*` headers) or as strings."""
    return bytes(value).decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def verify_signature(
    headers: dict[str, Any], exchange: str, routing_key: str, body: bytes, hmac_key: bytes
) -> None:
    """Check `x-message-signature`: HMAC-SHA256 with the external key over the six lines
    `<t>\\n<signature-version>\\n<X-Tenant-ID>\\n<jobId>\\n<exchange>\\n<routingKey>\\n` and the
    body, where `jobId` is the body's top-level `jobId`."""
    try:
        timestamp = header_text(headers["t"])
        version = header_text(headers["signature-version"])
        signature = header_text(headers["x-message-signature"])
    except KeyError as missing:
        raise Rejected(f"missing header {missing}") from None
    if version != "v1":
        raise Rejected(f"unsupported signature version {version!r}")
    tenant = header_text(headers.get("X-Tenant-ID", ""))
    job_id = json.loads(body).get("jobId", "")
    head = "\n".join((timestamp, version, tenant, job_id, exchange, routing_key, ""))
    expected = hmac.new(hmac_key, head.encode("utf-8") + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise Rejected("signature mismatch")


def object_key(prefix: str, result_path: str) -> str:
    """Where the result is: the workers' key prefix followed by the event's `result.path`."""
    return prefix + result_path


def open_result(blob: bytes, storage_key: bytes, hmac_key: bytes, expected_hmac: str) -> bytes:
    """The stored object is base64 of nonce (12 bytes) + AES-256-GCM ciphertext + tag; the
    event's `result.hmac` is the hex HMAC-SHA256 (external key) of the plaintext JSON."""
    raw = base64.b64decode(blob, validate=True)
    plaintext = AESGCM(storage_key).decrypt(raw[:NONCE_SIZE], raw[NONCE_SIZE:], None)
    actual = hmac.new(hmac_key, plaintext, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(actual, expected_hmac.lower()):
        raise Rejected("result HMAC mismatch")
    return plaintext


def message_document(message: aio_pika.abc.AbstractIncomingMessage) -> dict[str, Any]:
    """The message as `fetcher event verify` reads it: exchange, routing key, headers, body."""
    return {
        "exchange": message.exchange,
        "routingKey": message.routing_key,
        "headers": {name: header_text(value) for name, value in message.headers.items()},
        "body": message.body.decode("utf-8"),
    }


async def fetch_object(key: str) -> bytes:
    path_style = os.environ.get("OBJECT_STORAGE_USE_PATH_STYLE", "").lower() == "true"
    session = get_session()
    async with session.create_client(
        "s3",
        endpoint_url=os.environ.get("OBJECT_STORAGE_ENDPOINT") or None,
        region_name=os.environ.get("OBJECT_STORAGE_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("OBJECT_STORAGE_ACCESS_KEY_ID") or None,
        aws_secret_access_key=os.environ.get("OBJECT_STORAGE_SECRET_KEY") or None,
        config=AioConfig(s3={"addressing_style": "path" if path_style else "auto"}),
    ) as s3:
        answer = await s3.get_object(Bucket=os.environ["OBJECT_STORAGE_BUCKET"], Key=key)
        async with answer["Body"] as stream:
            data: bytes = await stream.read()
            return data


async def handle(
    message: aio_pika.abc.AbstractIncomingMessage, hmac_key: bytes, storage_key: bytes
) -> dict[str, Any]:
    """Verify one event and, for a completed job, fetch, decrypt and check its result."""
    headers = dict(message.headers)
    verify_signature(headers, message.exchange, message.routing_key or "", message.body, hmac_key)
    event = json.loads(message.body)
    # ce-id is stable across re-deliveries and re-emissions: use it to drop duplicates.
    summary: dict[str, Any] = {
        "eventId": header_text(headers.get("ce-id", "")),
        "jobId": event["jobId"],
        "status": event["status"],
    }
    if event["status"] == "failed":
        summary["error"] = event.get("error")
        return summary
    result = event["result"]
    prefix = os.environ.get("OBJECT_STORAGE_KEY_PREFIX", "")
    blob = await fetch_object(object_key(prefix, result["path"]))
    data = json.loads(open_result(blob, storage_key, hmac_key, result["hmac"]))
    summary["rows"] = {
        f"{datasource}.{table}": len(rows)
        for datasource, tables in data.items()
        for table, rows in tables.items()
    }
    return summary


async def consume(queue_name: str, max_messages: int | None, save_dir: Path | None) -> None:
    hmac_key = bytes.fromhex(os.environ["FETCHER_EXTERNAL_HMAC_KEY"])
    storage_key = bytes.fromhex(os.environ["FETCHER_STORAGE_KEY"])
    connection = await aio_pika.connect_robust(os.environ["RABBITMQ_URL"])
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=1)
        exchange = await channel.get_exchange(EVENTS_EXCHANGE)  # passive: Fetcher declares it
        queue = await channel.declare_queue(queue_name, durable=True)
        for routing_key in ("job.completed", "job.failed"):
            await queue.bind(exchange, routing_key=routing_key)
        print(json.dumps({"ready": queue_name}), flush=True)
        handled = 0
        async with queue.iterator() as messages:
            async for message in messages:
                if save_dir is not None:
                    path = save_dir / f"{json.loads(message.body)['jobId']}.message.json"
                    path.write_text(json.dumps(message_document(message)))
                try:
                    summary = await handle(message, hmac_key, storage_key)
                except Rejected as e:
                    # Never act on an event that does not verify; keep it aside for a human.
                    await message.reject(requeue=False)
                    print(json.dumps({"rejected": str(e)}), flush=True)
                else:
                    await message.ack()
                    print(json.dumps(summary), flush=True)
                handled += 1
                if max_messages is not None and handled >= max_messages:
                    return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", required=True, help="the consumer's own queue")
    parser.add_argument("--max-messages", type=int, help="stop after this many messages")
    parser.add_argument("--save-messages", type=Path, help="write each message here as JSON")
    args = parser.parse_args()
    try:
        asyncio.run(consume(args.queue, args.max_messages, args.save_messages))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
