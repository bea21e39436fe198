"""Counting the publishes of a policy: each failure, and each retry of a message that failed."""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator

from application.errors import PublishFailed
from application.ports.metrics import MessageKind, RelayMetrics

MAX_REMEMBERED = 10_000


class PublishAttempts:
    """Remembers which messages (by key) failed to publish, so that the next attempt at one
    counts as a retry. The policies retry the same message until it goes out, so only a few
    keys are ever remembered; the memory is bounded anyway."""

    __slots__ = ("_failed", "_kind", "_metrics")

    def __init__(self, kind: MessageKind, metrics: RelayMetrics) -> None:
        self._kind = kind
        self._metrics = metrics
        self._failed: set[Hashable] = set()

    @contextlib.contextmanager
    def attempt(self, key: Hashable) -> Iterator[None]:
        """Wraps one publish of the message ``key``: counts it as a retry when an earlier
        attempt failed, and counts a ``PublishFailed`` it raises (which goes on)."""
        if key in self._failed:
            self._metrics.publish_retried(self._kind)
        try:
            yield
        except PublishFailed:
            self._metrics.publish_failed(self._kind)
            if len(self._failed) >= MAX_REMEMBERED:
                self._failed.clear()
            self._failed.add(key)
            raise
        self._failed.discard(key)

    def failed_before(self, key: Hashable) -> bool:
        """An earlier attempt at the message ``key`` failed (its retries log quietly)."""
        return key in self._failed

    def forget(self, key: Hashable) -> None:
        """The message ``key`` will not be published again."""
        self._failed.discard(key)
