"""One contract for every ``ResultStorage``: the in-memory twin (unit suite), a folder and S3
(integration suite).

``ResultStorageContract`` holds the behaviour every adapter must show; each ``Test*`` subclass
supplies the adapter (``storage``), one that cannot work (``broken_storage``) and an ``inspector``
that looks at the backend directly (stored keys, unfinished uploads).
"""

from __future__ import annotations

import random
import uuid
from typing import Protocol

import pytest

from adapters.storage.s3 import MIN_PART_SIZE
from application.errors import StorageError
from application.ports.audit import WitnessConflict, WitnessStore
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

    # --- audit witnesses (``WitnessStore``) -------------------------------------------------------

    async def test_a_witness_is_written_once_and_never_replaced(
        self, storage: ResultStorage
    ) -> None:
        witnesses: WitnessStore = storage  # type: ignore[assignment]
        first, second = "audit/checkpoints/01.json", "audit/checkpoints/02.json"
        await witnesses.keep(first, b'{"position":1}')
        await witnesses.keep(first, b'{"position":1}')  # the same again: nothing to do
        with pytest.raises(WitnessConflict):
            await witnesses.keep(first, b'{"position":99}')
        await witnesses.keep(second, b'{"position":2}')
        await witnesses.keep("audit/other.json", b"{}")
        assert await witnesses.kept("audit/checkpoints/") == [
            (first, b'{"position":1}'),
            (second, b'{"position":2}'),
        ]
        assert await witnesses.kept("audit/none/") == []
        assert await witnesses.witnessed(first) == b'{"position":1}'
        assert await witnesses.witnessed("audit/checkpoints/03.json") is None
        assert await witnesses.witnessed("audit/checkpoints/0") is None  # whole keys only

    async def test_a_deleted_object_is_gone_and_deleting_nothing_is_fine(
        self, storage: ResultStorage, key: str
    ) -> None:
        await write_in_chunks(storage, key, b"written", chunk=4)
        await storage.delete(key)
        with pytest.raises(StorageError):
            await storage.read(key)
        await storage.delete(key)  # nothing there: nothing to do

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

    async def test_uploads_left_behind_at_a_key_are_aborted_and_only_those(
        self, storage: ResultStorage, key: str, inspector: Inspector
    ) -> None:
        other = f"external-data/{uuid.uuid4()}.json"
        for target in (key, key, other):
            left = await storage.begin(target)  # a worker died mid-upload
            await left.write(payload(PART_SIZE + 1))
        kept = await inspector.pending_uploads()
        assert kept == 3

        assert await storage.abort_incomplete(key) == 2

        assert await inspector.pending_uploads() == 1
        assert await storage.abort_incomplete(key) == 0
        assert await storage.abort_incomplete(other) == 1
        assert await inspector.pending_uploads() == 0
        assert await inspector.object_keys() == set()

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
