"""Contract of the ``ResultStorage`` port, run against every adapter.

``ResultStorageContract`` holds the behaviour every adapter must show; each ``Test*`` subclass
supplies the adapter (``storage``), one that cannot work (``broken_storage``) and an ``inspector``
that looks at the backend directly (stored keys, unfinished uploads).
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from adapters.memory.result_storage import InMemoryResultStorage
from adapters.storage.filesystem import TEMP_SUFFIX, FilesystemResultStorage
from adapters.storage.s3 import MIN_PART_SIZE, S3ResultStorage, S3Settings
from application.errors import StorageError
from application.ports.result_storage import ResultStorage

MiB = 1024 * 1024
PART_SIZE = MIN_PART_SIZE  # the smallest part S3 accepts, so a few MiB of data spans parts


def payload(size: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


async def write_in_chunks(storage: ResultStorage, key: str, data: bytes, chunk: int) -> None:
    upload = await storage.begin(key)
    for start in range(0, len(data), chunk):
        await upload.write(data[start : start + chunk])
    await upload.commit()


class Inspector(Protocol):
    async def object_keys(self) -> set[str]: ...

    async def pending_uploads(self) -> int: ...


class ResultStorageContract:
    @pytest.fixture
    def key_prefix(self) -> str:
        return f"contract-{uuid.uuid4().hex[:12]}/"

    @pytest.fixture
    def key(self) -> str:
        return f"external-data/{uuid.uuid4()}.json"

    # --- round trips ---------------------------------------------------------------------------

    async def test_object_written_in_small_chunks_round_trips_exactly(
        self, storage: ResultStorage, key: str
    ) -> None:
        data = payload(PART_SIZE + 3 * MiB + 12_345)

        await write_in_chunks(storage, key, data, chunk=777_777)

        assert await storage.read(key) == data

    async def test_single_write_larger_than_two_parts_round_trips_exactly(
        self, storage: ResultStorage, key: str
    ) -> None:
        data = payload(2 * PART_SIZE + 1234, seed=11)

        await write_in_chunks(storage, key, data, chunk=len(data))

        assert await storage.read(key) == data

    async def test_small_object_round_trips(self, storage: ResultStorage, key: str) -> None:
        await write_in_chunks(storage, key, b'{"pg": {}}', chunk=4)

        assert await storage.read(key) == b'{"pg": {}}'

    async def test_empty_object_round_trips(self, storage: ResultStorage, key: str) -> None:
        upload = await storage.begin(key)
        await upload.commit()

        assert await storage.read(key) == b""

    async def test_commit_replaces_an_existing_object(
        self, storage: ResultStorage, key: str
    ) -> None:
        await write_in_chunks(storage, key, b"first", chunk=5)
        await write_in_chunks(storage, key, b"second", chunk=5)

        assert await storage.read(key) == b"second"

    # --- visibility ----------------------------------------------------------------------------

    async def test_nothing_is_visible_before_commit(
        self, storage: ResultStorage, inspector: Inspector, key: str, key_prefix: str
    ) -> None:
        upload = await storage.begin(key)
        await upload.write(payload(PART_SIZE + MiB))

        with pytest.raises(StorageError):
            await storage.read(key)
        assert key_prefix + key not in await inspector.object_keys()

        await upload.commit()
        assert len(await storage.read(key)) == PART_SIZE + MiB

    async def test_abort_leaves_nothing_at_the_key(
        self, storage: ResultStorage, inspector: Inspector, key: str
    ) -> None:
        upload = await storage.begin(key)
        await upload.write(payload(PART_SIZE + 2 * MiB))

        await upload.abort()

        with pytest.raises(StorageError):
            await storage.read(key)
        assert await inspector.object_keys() == set()
        assert await inspector.pending_uploads() == 0

    async def test_abort_is_idempotent_and_ends_the_upload(
        self, storage: ResultStorage, key: str
    ) -> None:
        upload = await storage.begin(key)
        await upload.write(b"partial")
        await upload.abort()
        await upload.abort()

        with pytest.raises(StorageError):
            await upload.write(b"more")
        with pytest.raises(StorageError):
            await upload.commit()

    async def test_abort_after_commit_keeps_the_object(
        self, storage: ResultStorage, key: str
    ) -> None:
        upload = await storage.begin(key)
        await upload.write(b"kept")
        await upload.commit()
        await upload.abort()

        assert await storage.read(key) == b"kept"

    async def test_committed_object_is_stored_under_the_key_prefix(
        self, storage: ResultStorage, inspector: Inspector, key: str, key_prefix: str
    ) -> None:
        await write_in_chunks(storage, key, b"data", chunk=4)

        assert await inspector.object_keys() == {key_prefix + key}
        assert await inspector.pending_uploads() == 0

    async def test_reading_a_missing_key_raises_storage_error(
        self, storage: ResultStorage, key: str
    ) -> None:
        with pytest.raises(StorageError):
            await storage.read(key)

    # --- health and failures -------------------------------------------------------------------

    async def test_check_passes_on_working_storage(self, storage: ResultStorage) -> None:
        await storage.check()

    async def test_check_raises_storage_error_when_storage_cannot_work(
        self, broken_storage: ResultStorage
    ) -> None:
        with pytest.raises(StorageError):
            await broken_storage.check()

    async def test_failures_while_storing_raise_storage_error(
        self, broken_storage: ResultStorage, key: str
    ) -> None:
        with pytest.raises(StorageError):
            await write_in_chunks(broken_storage, key, payload(PART_SIZE + MiB), chunk=MiB)
        with pytest.raises(StorageError):
            await broken_storage.read(key)


# --- in memory ---------------------------------------------------------------------------------


class MemoryInspector:
    def __init__(self, storage: InMemoryResultStorage) -> None:
        self._storage = storage

    async def object_keys(self) -> set[str]:
        return set(self._storage.objects)

    async def pending_uploads(self) -> int:
        return self._storage.pending_uploads


class TestInMemoryResultStorage(ResultStorageContract):
    @pytest.fixture
    def storage(self, key_prefix: str) -> InMemoryResultStorage:
        return InMemoryResultStorage(key_prefix=key_prefix)

    @pytest.fixture
    def inspector(self, storage: InMemoryResultStorage) -> MemoryInspector:
        return MemoryInspector(storage)

    @pytest.fixture
    def broken_storage(self) -> InMemoryResultStorage:
        return InMemoryResultStorage(unavailable=True)


# --- filesystem --------------------------------------------------------------------------------


class FilesystemInspector:
    def __init__(self, root: Path) -> None:
        self._root = root

    def _files(self) -> list[Path]:
        return [p for p in self._root.rglob("*") if p.is_file()]

    async def object_keys(self) -> set[str]:
        return {
            p.relative_to(self._root).as_posix()
            for p in self._files()
            if not p.name.endswith(TEMP_SUFFIX)
        }

    async def pending_uploads(self) -> int:
        return sum(1 for p in self._files() if p.name.endswith(TEMP_SUFFIX))


class TestFilesystemResultStorage(ResultStorageContract):
    @pytest.fixture
    def root(self, tmp_path: Path) -> Path:
        return tmp_path / "objects"

    @pytest.fixture
    def storage(self, root: Path, key_prefix: str) -> FilesystemResultStorage:
        return FilesystemResultStorage(root, key_prefix=key_prefix)

    @pytest.fixture
    def inspector(self, root: Path) -> FilesystemInspector:
        return FilesystemInspector(root)

    @pytest.fixture
    def broken_storage(self, tmp_path: Path) -> FilesystemResultStorage:
        not_a_folder = tmp_path / "file"
        not_a_folder.write_bytes(b"")
        return FilesystemResultStorage(not_a_folder / "objects")

    @pytest.mark.parametrize("bad_key", ["../escape", "a/../../escape", "/etc/passwd", "a//b", ""])
    async def test_keys_outside_the_root_or_malformed_are_refused(
        self, storage: FilesystemResultStorage, bad_key: str, tmp_path: Path
    ) -> None:
        with pytest.raises(StorageError):
            await storage.begin(bad_key)
        with pytest.raises(StorageError):
            await storage.read(bad_key)
        assert not (tmp_path / "escape").exists()

    async def test_keys_through_a_symlink_out_of_the_root_are_refused(
        self, storage: FilesystemResultStorage, root: Path, key_prefix: str, tmp_path: Path
    ) -> None:
        (tmp_path / "outside").mkdir()
        (root / key_prefix).mkdir(parents=True)
        (root / key_prefix / "link").symlink_to(tmp_path / "outside")

        with pytest.raises(StorageError):
            await storage.begin("link/escape.json")
        assert list((tmp_path / "outside").iterdir()) == []

    async def test_write_failure_is_wrapped_with_its_cause(self, tmp_path: Path) -> None:
        storage = FilesystemResultStorage(tmp_path / "objects")
        (tmp_path / "objects").mkdir()
        (tmp_path / "objects" / "taken").write_bytes(b"")

        with pytest.raises(StorageError) as excinfo:
            await storage.begin("taken/under-a-file.json")

        assert isinstance(excinfo.value.__cause__, OSError)


# --- S3 (nanio) --------------------------------------------------------------------------------


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
        async with get_session().create_client(
            "s3",
            endpoint_url=s3_settings.endpoint_url,
            region_name=s3_settings.region,
            aws_access_key_id=s3_settings.access_key_id,
            aws_secret_access_key=s3_settings.secret_access_key,
            config=Config(s3={"addressing_style": "path"}),
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
