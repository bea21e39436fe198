"""The drain on SIGTERM/SIGINT (reference §7.5), without real signals: readiness turns to
draining at once, the listeners and loops stop once the drain is over, and what ended on its
own or failed stops the process at once."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

import pytest

from application.readiness import Readiness
from entrypoints.runners import Shutdown, _consume, _supervise


async def until_stopped(stop: asyncio.Event, ended: list[float]) -> None:
    await stop.wait()
    ended.append(time.monotonic())


async def test_a_signal_drains_then_stops(caplog):
    caplog.set_level(logging.INFO, logger="fetcher")
    shutdown = Shutdown(drain_seconds=0.3)
    readiness = Readiness()
    ended: list[float] = []
    supervised = asyncio.create_task(
        _supervise(shutdown, readiness, until_stopped(shutdown.stop, ended))
    )
    await asyncio.sleep(0.05)
    assert not readiness.draining
    signalled = time.monotonic()
    shutdown._on_signal(signal.SIGTERM)
    await asyncio.sleep(0.05)
    assert readiness.draining and not shutdown.stop.is_set()
    await asyncio.wait_for(supervised, 2)
    assert ended and ended[0] - signalled >= 0.3
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "shutdown: SIGTERM received, readiness reports draining for 0.3s"
    assert "shutdown: drain over, closing the listener and finishing in-flight work" in messages
    assert messages[-1] == "shutdown: complete"


async def test_a_second_signal_ends_the_drain_early():
    shutdown = Shutdown(drain_seconds=30)
    ended: list[float] = []
    supervised = asyncio.create_task(
        _supervise(shutdown, Readiness(), until_stopped(shutdown.stop, ended))
    )
    await asyncio.sleep(0.05)
    shutdown._on_signal(signal.SIGTERM)
    await asyncio.sleep(0.05)
    shutdown._on_signal(signal.SIGINT)
    await asyncio.wait_for(supervised, 2)
    assert ended


async def test_a_failing_part_stops_the_others_at_once_and_its_error_is_raised():
    shutdown = Shutdown(drain_seconds=30)
    readiness = Readiness()
    ended: list[float] = []

    async def fails() -> None:
        await asyncio.sleep(0.05)
        raise RuntimeError("listener lost")

    with pytest.raises(RuntimeError, match="listener lost"):
        await asyncio.wait_for(
            _supervise(shutdown, readiness, fails(), until_stopped(shutdown.stop, ended)), 2
        )
    assert ended and readiness.draining


async def test_a_part_that_ends_on_its_own_stops_the_others_without_a_drain(caplog):
    shutdown = Shutdown(drain_seconds=30)
    ended: list[float] = []

    async def ends() -> None:
        await asyncio.sleep(0.05)

    await asyncio.wait_for(
        _supervise(shutdown, Readiness(), ends(), until_stopped(shutdown.stop, ended)), 2
    )
    assert ended
    assert "a part of the process ended on its own" in caplog.text


class SlowConsumer:
    """A consumer whose one job takes ``seconds``; ``stop`` lets it finish."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.stop_asked: float | None = None
        self.finished: float | None = None
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        await asyncio.sleep(self.seconds)
        self.finished = time.monotonic()
        await self._stopping.wait()

    async def stop(self) -> None:
        self.stop_asked = time.monotonic()
        self._stopping.set()


async def test_the_worker_takes_no_new_work_from_the_signal_and_finishes_what_it_runs():
    shutdown = Shutdown(drain_seconds=0.5)
    consumer = SlowConsumer(seconds=0.2)
    ended: list[float] = []
    supervised = asyncio.create_task(
        _supervise(
            shutdown,
            Readiness(),
            until_stopped(shutdown.stop, ended),
            _consume(consumer, shutdown.requested),
        )
    )
    await asyncio.sleep(0.05)
    signalled = time.monotonic()
    shutdown._on_signal(signal.SIGTERM)
    await asyncio.wait_for(supervised, 3)
    assert consumer.stop_asked is not None and consumer.stop_asked - signalled < 0.1
    assert consumer.finished is not None
    assert ended[0] - signalled >= 0.5  # the listener stayed for the whole drain


async def test_the_first_failed_start_is_said_in_one_line_then_tried_again(
    monkeypatch, tmp_path, caplog
):
    """Everything answers, yet the first bootstrap fails (a dependency went down meanwhile):
    the runner says so, with the cause and without the address's secret, and starts again."""
    import contextlib
    import socket

    from entrypoints import runners
    from entrypoints.roles import Fetcher, Role
    from entrypoints.settings import Settings

    attempts: list[int] = []

    @contextlib.asynccontextmanager
    async def flaky_bootstrap(settings, *, roles, overrides):
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("connection to postgresql://app:hunter2@10.0.0.7/db refused")
        yield Fetcher()

    monkeypatch.setattr(runners, "bootstrap", flaky_bootstrap)
    caplog.set_level(logging.INFO, logger="fetcher")
    settings = Settings.from_env(
        {"FETCHER_DATA_DIR": str(tmp_path), "SERVER_ADDRESS": "127.0.0.1:4999"}
    )
    with socket.create_server(("127.0.0.1", 0)) as sock:
        async with contextlib.AsyncExitStack() as stack:
            fetcher = await runners._start_http(
                stack, settings, {Role.API}, Shutdown(drain_seconds=0), sock
            )
    assert isinstance(fetcher, Fetcher) and len(attempts) == 2
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    failed = [line for line in lines if line.startswith("start failed (")]
    assert len(failed) == 1, lines
    assert "hunter2" not in failed[0]
