"""The result storage contract on a folder, and the keys that would leave it."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.storage.filesystem import TEMP_SUFFIX, FilesystemResultStorage
from application.errors import StorageError
from tests.contracts.result_storage import (
    ResultStorageContract,
)


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
