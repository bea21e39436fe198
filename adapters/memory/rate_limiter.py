"""Token buckets in process memory (the reference's connection-test limiter)."""

from __future__ import annotations

import time
from collections.abc import Callable

from application.ports.rate_limiter import RateLimiter


class InMemoryTokenBucket(RateLimiter):
    """One bucket per key: ``capacity`` tokens, refilled continuously at ``per_minute`` a
    minute (10 and 10 for connection tests: a burst of ten, then one every six seconds).

    Limits are per process, so several API replicas each allow that rate. Full buckets are
    forgotten once there are more than ``max_keys``, so memory stays bounded.
    """

    def __init__(
        self,
        capacity: int = 10,
        per_minute: float = 10.0,
        *,
        max_keys: int = 10_000,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1 or per_minute <= 0:
            raise ValueError("capacity and per_minute must be positive")
        self._capacity = float(capacity)
        self._rate = per_minute / 60.0
        self._max_keys = max_keys
        self._now = now
        self._buckets: dict[str, tuple[float, float]] = {}

    def _level(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self._capacity, now))
        return min(self._capacity, tokens + (now - at) * self._rate)

    async def acquire(self, key: str) -> float:
        now = self._now()
        tokens = self._level(key, now)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._prune(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self._rate

    def _prune(self, now: float) -> None:
        if len(self._buckets) <= self._max_keys:
            return
        self._buckets = {
            key: value
            for key, value in self._buckets.items()
            if self._level(key, now) < self._capacity
        }
