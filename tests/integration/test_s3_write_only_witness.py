"""A relay whose bucket credentials may write the witnesses but not read them back (the
write-only access the auditors guide suggests): a checkpoint is witnessed once, never replaced,
and a second relay or a restart witnessing it again is no failure. The bucket is the S3 test
server behind a front answering as AWS S3 does for such credentials (``tests/support/s3_front.py``:
reads denied, conditional creates honoured)."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.errors import StorageRejected
from tests.support.nanio import s3_client
from tests.support.s3_front import S3Front

pytestmark = pytest.mark.integration

KEY = "audit/checkpoints/00000000000000000007.json"
BUCKET = os.environ.get("FETCHER_TEST_S3_BUCKET", "fetcher-test")


@pytest.fixture
async def write_only(s3_settings: S3Settings) -> AsyncIterator[tuple[S3ResultStorage, Any, str]]:
    prefix = f"write-only-{uuid.uuid4().hex[:8]}/"
    target = urlsplit(s3_settings.endpoint_url)
    async with (
        S3Front(target.hostname or "", target.port or 80, readable=False) as front,
        s3_client(
            s3_settings.endpoint_url, s3_settings.access_key_id, s3_settings.secret_access_key
        ) as direct,
    ):
        settings = dataclasses.replace(s3_settings, endpoint_url=front.endpoint, key_prefix=prefix)
        storage = await S3ResultStorage.open(settings)
        try:
            yield storage, direct, prefix
        finally:
            await storage.close()
            await direct.delete_object(Bucket=settings.bucket, Key=prefix + KEY)


async def _stored(direct: Any, key: str) -> bytes:
    response = await direct.get_object(Bucket=BUCKET, Key=key)
    async with response["Body"] as stream:
        data: bytes = await stream.read()
    return data


async def test_a_checkpoint_is_witnessed_without_read_access(write_only):
    storage, direct, prefix = write_only
    await storage.keep(KEY, b'{"position": 7}')
    assert await _stored(direct, prefix + KEY) == b'{"position": 7}'


async def test_witnessing_it_again_is_no_failure_and_replaces_nothing(write_only):
    storage, direct, prefix = write_only
    await storage.keep(KEY, b'{"position": 7}')
    await storage.keep(KEY, b'{"position": 7}')  # a restart, or a second relay
    await storage.keep(KEY, b'{"position": 7, "rewritten": true}')  # cannot be compared here
    assert await _stored(direct, prefix + KEY) == b'{"position": 7}'


async def test_reading_a_witness_back_is_what_such_credentials_are_refused(write_only):
    storage, _, _ = write_only
    await storage.keep(KEY, b'{"position": 7}')
    with pytest.raises(StorageRejected, match="access denied"):
        await storage.witnessed(KEY)
