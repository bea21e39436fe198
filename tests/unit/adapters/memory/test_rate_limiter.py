"""The in-memory token bucket that limits connection tests."""

from __future__ import annotations

import pytest

from adapters.memory.rate_limiter import InMemoryTokenBucket


class Ticks:
    def __init__(self) -> None:
        self.value = 0.0

    def __call__(self) -> float:
        return self.value


async def test_token_bucket_allows_a_burst_then_one_every_six_seconds():
    ticks = Ticks()
    bucket = InMemoryTokenBucket(10, 10, now=ticks)
    assert [await bucket.acquire("a") for _ in range(10)] == [0.0] * 10
    assert await bucket.acquire("a") == pytest.approx(6.0)
    assert await bucket.acquire("b") == 0.0
    ticks.value = 3.0
    assert await bucket.acquire("a") == pytest.approx(3.0)
    ticks.value = 6.0
    assert await bucket.acquire("a") == 0.0
    assert await bucket.acquire("a") == pytest.approx(6.0)


async def test_token_bucket_forgets_full_buckets_beyond_its_key_limit():
    ticks = Ticks()
    bucket = InMemoryTokenBucket(10, 10, max_keys=5, now=ticks)
    for i in range(20):
        await bucket.acquire(f"k{i}")
    ticks.value = 60.0
    await bucket.acquire("last")
    assert len(bucket._buckets) <= 5
