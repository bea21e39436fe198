"""Dict-backed ``ResultStorage`` for unit tests and embedded runs: no I/O, deterministic, with the
same commit/abort semantics as the real adapters."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from application.errors import StorageError
from application.ports.audit import WitnessConflict
from application.ports.result_storage import ResultStorage, ResultUpload


class InMemoryResultUpload(ResultUpload):
    def __init__(self, storage: InMemoryResultStorage, object_key: str) -> None:
        self._storage = storage
        self._object_key = object_key
        self._buffer = bytearray()
        self._state = "open"

    async def write(self, data: bytes) -> None:
        self._require_open("write")
        self._storage._raise_if_unavailable("write")
        self._buffer += data

    async def commit(self) -> None:
        if self._state == "committed":
            return
        self._require_open("commit")
        try:
            self._storage._raise_if_unavailable("commit")
        except StorageError:
            await self.abort()
            raise
        self._storage._objects[self._object_key] = bytes(self._buffer)
        self._finish("committed")

    async def abort(self) -> None:
        if self._state == "open":
            self._storage._raise_if_unavailable("abort")
            self._finish("aborted")

    @property
    def object_key(self) -> str:
        return self._object_key

    def _finish(self, state: str) -> None:
        self._state = state
        self._buffer = bytearray()
        self._storage._pending.discard(self)

    def _require_open(self, operation: str) -> None:
        if self._state != "open":
            raise StorageError(f"cannot {operation}: upload already {self._state}")


class InMemoryResultStorage(ResultStorage):
    """``objects`` shows what is stored (keys include ``key_prefix``); ``pending_uploads`` counts
    uploads neither committed nor aborted. Set ``unavailable`` to make every call raise
    ``StorageError``, as a real store does when it cannot be reached."""

    def __init__(self, *, key_prefix: str = "", unavailable: bool = False) -> None:
        self._key_prefix = key_prefix
        self.unavailable = unavailable
        self._objects: dict[str, bytes] = {}
        self._pending: set[InMemoryResultUpload] = set()

    @property
    def objects(self) -> Mapping[str, bytes]:
        return MappingProxyType(self._objects)

    @property
    def pending_uploads(self) -> int:
        return len(self._pending)

    async def begin(self, key: str) -> ResultUpload:
        self._raise_if_unavailable("begin")
        upload = InMemoryResultUpload(self, self._object_key(key))
        self._pending.add(upload)
        return upload

    async def keep(self, key: str, data: bytes) -> None:
        self._raise_if_unavailable("keep")
        held = self._objects.setdefault(self._object_key(key), data)
        if held != data:
            raise WitnessConflict(f"'{key}' holds other bytes")

    async def witnessed(self, key: str) -> bytes | None:
        self._raise_if_unavailable("read")
        return self._objects.get(self._object_key(key))

    async def kept(self, prefix: str) -> list[tuple[str, bytes]]:
        self._raise_if_unavailable("list")
        start = self._key_prefix + prefix
        return [
            (key.removeprefix(self._key_prefix), data)
            for key, data in sorted(self._objects.items())
            if key.startswith(start)
        ]

    async def read(self, key: str) -> bytes:
        self._raise_if_unavailable("read")
        try:
            return self._objects[self._object_key(key)]
        except KeyError:
            raise StorageError(f"object not found: '{key}'") from None

    async def delete(self, key: str) -> None:
        self._raise_if_unavailable("delete")
        self._objects.pop(self._object_key(key), None)

    async def abort_incomplete(self, key: str) -> int:
        self._raise_if_unavailable("abort incomplete uploads")
        left = [u for u in self._pending if u.object_key == self._object_key(key)]
        for upload in left:
            await upload.abort()
        return len(left)

    async def check(self) -> None:
        self._raise_if_unavailable("check")

    async def close(self) -> None:
        return None

    def _object_key(self, key: str) -> str:
        if not key:
            raise StorageError("object key is empty")
        return self._key_prefix + key

    def _raise_if_unavailable(self, operation: str) -> None:
        if self.unavailable:
            raise StorageError(f"{operation} failed: storage unavailable")
