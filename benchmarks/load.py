"""Shared pieces of the small-job benchmarks: a cheap HTTP/1.1 load generator, percentiles, and
what the machine was doing meanwhile.

The load generator writes raw HTTP/1.1 over kept-alive sockets instead of going through an HTTP
client library, so that on a 2-core machine the client's own CPU takes as little as possible
from the server it measures.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


class HttpConnection:
    """One kept-alive HTTP/1.1 connection that sends JSON and reads whole responses."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str):
        self.reader = reader
        self.writer = writer
        self.host = host

    @classmethod
    async def open(cls, base_url: str) -> HttpConnection:
        parts = urlsplit(base_url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        return cls(reader, writer, parts.netloc)

    async def post(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        payload = json.dumps(body, separators=(",", ":")).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n{extra}\r\n"
        )
        self.writer.write(head.encode() + payload)
        return await self._response()

    async def _response(self) -> tuple[int, bytes]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return status, await self.reader.readexactly(length) if length else b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


@dataclass
class LoadResult:
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    """CPU time (user + system) the measured server process used meanwhile, when taken."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        return percentile(self.latencies, p)


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100), nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


async def closed_loop(
    base_url: str,
    path: str,
    body: Callable[[int], Any],
    *,
    clients: int,
    seconds: float,
    headers: dict[str, str] | None = None,
) -> LoadResult:
    """``clients`` connections, each sending its next request as soon as the last one was
    answered, for ``seconds``; ``body(n)`` makes the n-th request's body (n unique per run)."""
    counter = iter(range(10**12))
    connections = [await HttpConnection.open(base_url) for _ in range(clients)]
    result = LoadResult(seconds=seconds)
    deadline = time.perf_counter() + seconds

    async def client(connection: HttpConnection) -> None:
        while time.perf_counter() < deadline:
            payload = body(next(counter))
            started = time.perf_counter()
            status, _ = await connection.post(path, payload, headers)
            result.latencies.append(time.perf_counter() - started)
            result.statuses[status] = result.statuses.get(status, 0) + 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(client(c) for c in connections))
    finally:
        result.seconds = time.perf_counter() - started
        for connection in connections:
            await connection.close()
    return result


async def open_loop(
    base_url: str,
    path: str,
    body: Callable[[int], Any],
    *,
    rate: float,
    clients: int,
    seconds: float,
    headers: dict[str, str] | None = None,
) -> LoadResult:
    """Requests sent at a fixed ``rate`` per second over ``clients`` connections, for
    ``seconds``. A request that finds every connection busy waits for one; its latency counts
    from the moment it was due, so a slow server cannot hide its backlog (no coordinated
    omission)."""
    idle: asyncio.Queue[HttpConnection] = asyncio.Queue()
    for _ in range(clients):
        idle.put_nowait(await HttpConnection.open(base_url))
    result = LoadResult(seconds=seconds)
    total = int(rate * seconds)
    started = time.perf_counter()

    async def one(n: int, due: float) -> None:
        connection = await idle.get()
        try:
            status, _ = await connection.post(path, body(n), headers)
        finally:
            idle.put_nowait(connection)
        result.latencies.append(time.perf_counter() - due)
        result.statuses[status] = result.statuses.get(status, 0) + 1

    tasks = []
    for n in range(total):
        due = started + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n, due)))
    await asyncio.gather(*tasks)
    result.seconds = time.perf_counter() - started
    while not idle.empty():
        await idle.get_nowait().close()
    return result


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, and the core count, as ``uptime`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
