"""A private nanio S3 server for tests that kill and restart it (never the shared one)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from aiobotocore.session import get_session
from botocore.config import Config

ACCESS_KEY = "fetcher-outage"
SECRET_KEY = "fetcher-outage-secret"  # test-only credentials of a throwaway server


def s3_client(endpoint: str | None, access_key: str | None, secret_key: str | None) -> Any:
    """A plain client of an S3 test server (path-style, ``us-east-1``), to look at what was
    stored there: ``async with s3_client(...) as client``."""
    return get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=Config(s3={"addressing_style": "path"}),
    )


def nanio_binary() -> str:
    """``FETCHER_TEST_NANIO`` (which ``deploy/services.sh env`` sets) when it exists, else
    ``nanio`` on the path, else the one ``deploy/services.sh`` installs (in the main
    checkout when this is a worktree)."""
    given = os.environ.get("FETCHER_TEST_NANIO", "")
    found = given if given and Path(given).exists() else shutil.which("nanio")
    if found:
        return found
    common = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    for repo in (Path.cwd(), Path(common).parent if common else Path.cwd()):
        candidate = repo / ".ci-state" / "tools" / "nanio" / "bin" / "nanio"
        if candidate.exists():
            return str(candidate)
    pytest.fail("nanio is not installed: run deploy/services.sh start", pytrace=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Nanio:
    """``start``/``kill``/``start`` again on the same port and data folder."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "NANIO_ACCESS_KEY": ACCESS_KEY, "NANIO_SECRET_KEY": SECRET_KEY}
        self._process = subprocess.Popen(
            [nanio_binary(), "serve", "--data-dir", str(self.data_dir), "--host", "127.0.0.1",
             "--port", str(self.port), "--no-access-log", "--log-level", "warning"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("nanio did not start")

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None
