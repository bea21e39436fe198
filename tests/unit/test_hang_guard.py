"""A test that hangs is a failing test: inside the event loop it is cancelled a little before
its pytest-timeout limit and fails saying so (``tests/conftest.py``), and a server a test
started that never shuts down fails the test (``tests/support/serving.py``)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import uvicorn

from tests.support.serving import stop_server

ROOT = Path(__file__).resolve().parents[2]

HANGING = """
import asyncio

async def test_awaits_forever():
    await asyncio.Event().wait()

async def test_teardown_waits_forever():
    try:
        await asyncio.sleep(0.01)
    finally:
        await asyncio.Event().wait()
"""


def test_a_coroutine_test_that_hangs_fails_within_its_limit(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_hanging.py").write_text(HANGING)
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
            "-o", "asyncio_mode=auto", "-o", "timeout=4", "--rootdir", str(tmp_path),
            str(tmp_path / "test_hanging.py"),
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 failed" in run.stdout, run.stdout
    assert "did not finish within 3 s inside the event loop" in run.stdout
    assert elapsed < 60


async def _never_answers(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    await asyncio.Event().wait()


async def test_a_server_that_does_not_shut_down_fails_the_test_in_bounded_time() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(_never_answers, log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.01)
    _, writer = await asyncio.open_connection(*sock.getsockname())
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(0.1)  # the request is in the app, which never answers
    started = time.monotonic()
    with pytest.raises(AssertionError, match="did not shut down within 1 s"):
        await stop_server(server, task, within=1.0)
    assert time.monotonic() - started < 5
    assert task.done()
    writer.close()
    sock.close()
