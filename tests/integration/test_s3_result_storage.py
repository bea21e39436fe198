"""The result storage contract on S3 (nanio): multipart uploads, and how a missing bucket, wrong
credentials and an unreachable endpoint fail."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.errors import StorageError
from tests.contracts.result_storage import (
    PART_SIZE,
    MiB,
    ResultStorageContract,
    payload,
    write_in_chunks,
)
from tests.support.nanio import s3_client


class S3Inspector:
    def __init__(self, client: Any, bucket: str, prefix: str) -> None:
        self._client = client
        self._bucket = bucket
        self._prefix = prefix

    async def object_keys(self) -> set[str]:
        listed = await self._client.list_objects_v2(Bucket=self._bucket, Prefix=self._prefix)
        return {item["Key"] for item in listed.get("Contents", [])}

    async def uploads(self) -> list[dict[str, Any]]:
        listed = await self._client.list_multipart_uploads(Bucket=self._bucket)
        return [u for u in listed.get("Uploads", []) if u["Key"].startswith(self._prefix)]

    async def pending_uploads(self) -> int:
        return len(await self.uploads())

    async def clean(self) -> None:
        for upload in await self.uploads():
            await self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        for key in await self.object_keys():
            await self._client.delete_object(Bucket=self._bucket, Key=key)


class TestS3ResultStorage(ResultStorageContract):
    @pytest.fixture
    def settings(self, s3_settings: S3Settings, key_prefix: str) -> S3Settings:
        return dataclasses.replace(s3_settings, key_prefix=key_prefix, part_size=PART_SIZE)

    @pytest.fixture
    async def storage(self, settings: S3Settings) -> AsyncIterator[S3ResultStorage]:
        storage = await S3ResultStorage.open(settings)
        yield storage
        await storage.close()

    @pytest.fixture
    async def raw_client(self, s3_settings: S3Settings) -> AsyncIterator[Any]:
        async with s3_client(
            s3_settings.endpoint_url, s3_settings.access_key_id, s3_settings.secret_access_key
        ) as client:
            yield client

    @pytest.fixture
    async def inspector(self, raw_client: Any, settings: S3Settings) -> AsyncIterator[S3Inspector]:
        inspector = S3Inspector(raw_client, settings.bucket, settings.key_prefix)
        yield inspector
        await inspector.clean()

    @pytest.fixture
    async def broken_storage(self, settings: S3Settings) -> AsyncIterator[S3ResultStorage]:
        missing = dataclasses.replace(settings, bucket=f"fetcher-missing-{uuid.uuid4().hex[:8]}")
        storage = await S3ResultStorage.open(missing)
        yield storage
        await storage.close()

    async def test_large_object_is_uploaded_in_parts(
        self,
        storage: S3ResultStorage,
        inspector: S3Inspector,
        raw_client: Any,
        key: str,
        settings: S3Settings,
    ) -> None:
        data = payload(2 * PART_SIZE + MiB)

        await write_in_chunks(storage, key, data, chunk=MiB)

        head = await raw_client.head_object(Bucket=settings.bucket, Key=settings.key_prefix + key)
        assert head["ETag"].strip('"').endswith("-3")
        assert head["ContentType"] == "application/octet-stream"
        assert head["ContentLength"] == len(data)

    async def test_small_object_is_one_put_with_octet_stream_type(
        self,
        storage: S3ResultStorage,
        inspector: S3Inspector,
        raw_client: Any,
        key: str,
        settings: S3Settings,
    ) -> None:
        await write_in_chunks(storage, key, b"small", chunk=5)

        head = await raw_client.head_object(Bucket=settings.bucket, Key=settings.key_prefix + key)
        assert "-" not in head["ETag"]
        assert head["ContentType"] == "application/octet-stream"

    async def test_no_upload_waits_for_100_continue(
        self, storage: S3ResultStorage, inspector: S3Inspector, key: str
    ) -> None:
        sent: list[tuple[str, bool]] = []

        def note(request: Any, **_: Any) -> None:
            expects = request.headers.get("Expect", b"") == b"100-continue"
            sent.append(("part" if "partNumber=" in request.url else request.method, expects))

        storage._client.meta.events.register("before-send.s3", note)  # type: ignore[attr-defined]
        await write_in_chunks(storage, key, b"small", chunk=5)
        assert sent == [("PUT", False)]
        sent.clear()
        await write_in_chunks(storage, "large-" + key, payload(PART_SIZE + MiB), chunk=MiB)
        assert [kind for kind, _ in sent] == ["POST", "part", "part", "POST"]
        assert not any(expects for _, expects in sent)

    async def test_parts_are_exactly_part_size_and_bodies_are_sent_unsigned(
        self, storage: S3ResultStorage, inspector: S3Inspector, key: str
    ) -> None:
        sent: list[tuple[str, str, int]] = []

        def record(request: Any, event_name: str, **_: Any) -> None:
            body = request.body
            if body is None or isinstance(body, bytes | bytearray):
                size = len(body or b"")
            else:
                size = len(body.getbuffer())
            digest = request.headers["X-Amz-Content-SHA256"]
            digest = digest.decode() if isinstance(digest, bytes) else digest
            sent.append((event_name.rsplit(".", 1)[-1], digest, size))

        storage._client.meta.events.register("before-send.s3.*", record)
        data = payload(2 * PART_SIZE + 12_345, seed=5)
        # Writes that straddle parts, and one spanning a whole part.
        await write_in_chunks(storage, key, data[: PART_SIZE - 1], chunk=PART_SIZE - 1)
        await write_in_chunks(storage, key + ".2", data, chunk=PART_SIZE + 7)

        assert await storage.read(key + ".2") == data
        parts = [(digest, size) for op, digest, size in sent if op == "UploadPart"]
        assert [size for _, size in parts] == [PART_SIZE, PART_SIZE, 12_345]
        put = [(digest, size) for op, digest, size in sent if op == "PutObject"]
        assert put == [("UNSIGNED-PAYLOAD", PART_SIZE - 1)]
        assert {digest for digest, _ in parts} == {"UNSIGNED-PAYLOAD"}

    async def test_a_part_sent_again_after_a_connection_failure_is_sent_whole(
        self, storage: S3ResultStorage, inspector: S3Inspector, key: str
    ) -> None:
        failed: list[int] = []

        def fail_once(request: Any, **_: Any) -> None:
            if not failed:
                failed.append(len(request.body.read()))  # as if sent, then the connection broke
                raise EndpointConnectionError(endpoint_url=request.url)

        storage._client.meta.events.register("before-send.s3.UploadPart", fail_once)
        data = payload(PART_SIZE + MiB, seed=9)

        await write_in_chunks(storage, key, data, chunk=MiB)

        assert failed == [PART_SIZE]
        assert await storage.read(key) == data

    async def test_missing_bucket_is_reported_as_not_found(
        self, broken_storage: S3ResultStorage
    ) -> None:
        with pytest.raises(StorageError, match="bucket not found") as excinfo:
            await broken_storage.check()
        assert isinstance(excinfo.value.__cause__, ClientError)

    async def test_wrong_credentials_are_reported_as_access_denied_without_the_secret(
        self, settings: S3Settings, key: str
    ) -> None:
        secret = "wrong-secret-" + uuid.uuid4().hex
        wrong = dataclasses.replace(settings, secret_access_key=secret)
        assert secret not in repr(wrong)
        storage = await S3ResultStorage.open(wrong)
        try:
            with pytest.raises(StorageError, match="access denied") as excinfo:
                await storage.check()
            with pytest.raises(StorageError) as read_error:
                await storage.read(key)
        finally:
            await storage.close()
        for error in (excinfo.value, read_error.value):
            assert secret not in str(error)

    async def test_unreachable_endpoint_raises_storage_error(
        self, settings: S3Settings, key: str
    ) -> None:
        unreachable = dataclasses.replace(settings, endpoint_url="http://127.0.0.1:9")
        storage = await S3ResultStorage.open(unreachable)
        try:
            with pytest.raises(StorageError) as excinfo:
                await storage.check()
            with pytest.raises(StorageError):
                await write_in_chunks(storage, key, b"data", chunk=4)
        finally:
            await storage.close()
        assert isinstance(excinfo.value.__cause__, BotoCoreError)
