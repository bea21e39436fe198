"""``ResultStorage`` in a local folder (the embedded default): the object lives at ``root/<key>``.

Each upload writes a hidden temporary file next to its target and ``os.replace``s it into place on
commit, after an fsync, so a reader never sees a partial file at the key. File I/O runs in worker
threads, in chunks of ``chunk_size`` bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from application.errors import StorageError
from application.ports.audit import WitnessConflict
from application.ports.result_storage import ResultStorage, ResultUpload

DEFAULT_CHUNK_SIZE = 1024 * 1024
TEMP_SUFFIX = ".part"


@contextlib.contextmanager
def _wrap(operation: str, key: str) -> Iterator[None]:
    try:
        yield
    except StorageError:
        raise
    except FileNotFoundError as e:
        raise StorageError(f"{operation} failed for '{key}': not found") from e
    except PermissionError as e:
        raise StorageError(f"{operation} failed for '{key}': permission denied") from e
    except OSError as e:
        raise StorageError(
            f"{operation} failed for '{key}': {e.strerror or type(e).__name__}"
        ) from e


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FilesystemResultUpload(ResultUpload):
    """One object being written; not safe for concurrent ``write`` calls."""

    def __init__(self, key: str, target: Path, file: BinaryIO, temp: Path, chunk_size: int) -> None:
        self._key = key
        self._target = target
        self._file = file
        self._temp = temp
        self._chunk_size = chunk_size
        self._buffer = bytearray()
        self._state = "open"

    async def write(self, data: bytes) -> None:
        self._require_open("write")
        self._buffer += data
        if len(self._buffer) >= self._chunk_size:
            chunk, self._buffer = bytes(self._buffer), bytearray()
            try:
                await asyncio.to_thread(self._write_chunk, chunk)
            except StorageError:
                await self.abort()
                raise

    async def commit(self) -> None:
        if self._state == "committed":
            return
        self._require_open("commit")
        rest, self._buffer = bytes(self._buffer), bytearray()
        try:
            await asyncio.to_thread(self._finish, rest)
        except StorageError:
            await self.abort()
            raise
        self._state = "committed"

    async def abort(self) -> None:
        if self._state != "open":
            return
        self._state = "aborted"
        self._buffer = bytearray()
        await asyncio.to_thread(self._discard)

    def _write_chunk(self, chunk: bytes) -> None:
        with _wrap("write", self._key):
            self._file.write(chunk)

    def _finish(self, rest: bytes) -> None:
        with _wrap("commit", self._key):
            self._file.write(rest)
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._temp, self._target)
            _fsync_dir(self._target.parent)

    def _discard(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            self._temp.unlink()

    def _require_open(self, operation: str) -> None:
        if self._state != "open":
            raise StorageError(f"cannot {operation}: upload already {self._state}")


class FilesystemResultStorage(ResultStorage):
    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        key_prefix: str = "",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self._root = Path(root).absolute()
        self._key_prefix = key_prefix
        self._chunk_size = chunk_size

    async def begin(self, key: str) -> ResultUpload:
        target = self._path(key)
        file, temp = await asyncio.to_thread(self._open_temp, key, target)
        return FilesystemResultUpload(key, target, file, temp, self._chunk_size)

    async def read(self, key: str) -> bytes:
        target = self._path(key)

        def _read() -> bytes:
            with _wrap("read", key):
                return target.read_bytes()

        return await asyncio.to_thread(_read)

    async def delete(self, key: str) -> None:
        target = self._path(key)

        def _delete() -> None:
            with _wrap("delete", key):
                target.unlink(missing_ok=True)

        await asyncio.to_thread(_delete)

    async def abort_incomplete(self, key: str) -> int:
        target = self._path(key)

        def _discard() -> int:
            with _wrap("abort incomplete uploads", key):
                if not target.parent.is_dir():
                    return 0
                left = list(target.parent.glob(f".{target.name}.*{TEMP_SUFFIX}"))
                for temp in left:
                    with contextlib.suppress(FileNotFoundError):
                        temp.unlink()
                return len(left)

        return await asyncio.to_thread(_discard)

    async def keep(self, key: str, data: bytes) -> None:
        """``WitnessStore.keep``: an exclusive create, so a file there is never replaced."""
        target = self._path(key)

        def _keep() -> None:
            with _wrap("keep", key):
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with open(target, "xb") as file:
                        file.write(data)
                        file.flush()
                        os.fsync(file.fileno())
                except FileExistsError:
                    if target.read_bytes() != data:
                        raise WitnessConflict(f"'{key}' holds other bytes") from None
                    return
                _fsync_dir(target.parent)

        await asyncio.to_thread(_keep)

    async def witnessed(self, key: str) -> bytes | None:
        target = self._path(key)

        def _witnessed() -> bytes | None:
            with _wrap("read", key):
                try:
                    return target.read_bytes()
                except FileNotFoundError:
                    return None

        return await asyncio.to_thread(_witnessed)

    async def kept(self, prefix: str) -> list[tuple[str, bytes]]:
        base = self._root.joinpath(*(self._key_prefix + prefix).rstrip("/").split("/"))

        def _kept() -> list[tuple[str, bytes]]:
            with _wrap("list", prefix):
                if not base.is_dir():
                    return []
                found = []
                for path in sorted(base.rglob("*")):
                    if path.is_file() and not path.name.startswith("."):
                        key = path.relative_to(self._root).as_posix()
                        found.append((key.removeprefix(self._key_prefix), path.read_bytes()))
                return found

        return await asyncio.to_thread(_kept)

    async def check(self) -> None:
        def _probe() -> None:
            try:
                self._root.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=self._root):
                    pass
            except OSError as e:
                reason = e.strerror or type(e).__name__
                raise StorageError(f"storage folder is not writable: {reason}") from e

        await asyncio.to_thread(_probe)

    async def close(self) -> None:
        return None

    def _path(self, key: str) -> Path:
        full = self._key_prefix + key
        parts = full.split("/")
        if (
            not key
            or "\\" in full
            or "\x00" in full
            or any(part in ("", ".", "..") for part in parts)
            or (parts[-1].startswith(".") and parts[-1].endswith(TEMP_SUFFIX))
        ):
            raise StorageError(f"invalid object key '{key}'")
        return self._root.joinpath(*parts)

    def _open_temp(self, key: str, target: Path) -> tuple[BinaryIO, Path]:
        with _wrap("begin", key):
            if not target.parent.resolve().is_relative_to(self._root.resolve()):
                raise StorageError(f"invalid object key '{key}'")
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX
            )
            return os.fdopen(fd, "wb"), Path(name)
