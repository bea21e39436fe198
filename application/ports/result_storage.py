from __future__ import annotations

from typing import Protocol


class ResultUpload(Protocol):
    """One object being written. Nothing is visible at the key until ``commit`` succeeds;
    ``abort`` discards everything written so far and is safe to call more than once."""

    async def write(self, data: bytes) -> None: ...

    async def commit(self) -> None: ...

    async def abort(self) -> None: ...


class ResultStorage(Protocol):
    """Object storage for encrypted results (S3-compatible, or a folder on the embedded default).

    ``key`` is the path reported to consumers (``external-data/<jobId>.json``); an implementation
    may prepend its configured prefix. Errors raise ``application.errors.StorageError``.
    """

    async def begin(self, key: str) -> ResultUpload: ...

    async def read(self, key: str) -> bytes: ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...
