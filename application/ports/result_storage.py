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
    may prepend its configured prefix. Errors raise ``application.errors.StorageError``
    (``StorageRejected`` when the storage answered and refused: a missing bucket, denied
    access).

    ``abort_incomplete`` aborts every upload to ``key`` begun by any process and neither
    committed nor aborted (one a dead worker left behind, or one whose abort failed) and
    returns how many; call it only while no live upload to ``key`` can exist (the caller's
    claim holds the job's lease).

    ``delete`` removes the object at ``key``; nothing there is nothing to do.
    """

    async def begin(self, key: str) -> ResultUpload: ...

    async def read(self, key: str) -> bytes: ...

    async def abort_incomplete(self, key: str) -> int: ...

    async def delete(self, key: str) -> None: ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...
