"""The result storage contract on the in-memory twin."""

from __future__ import annotations

import pytest

from adapters.memory.result_storage import InMemoryResultStorage
from tests.contracts.result_storage import ResultStorageContract


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
