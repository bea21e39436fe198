"""Metrics kept in plain Python structures, for tests that check a use case counted its work."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from application.ports.metrics import FailureReason, MessageKind, Metrics


@dataclass
class InMemoryMetrics(Metrics):
    """Every call, recorded: counters in ``counts`` keyed by ``(name, label)``, observations
    in ``observed`` by name, the latest gauge values in ``gauges``."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    observed: dict[str, list[float]] = field(default_factory=dict)
    gauges: dict[tuple[str, str], float] = field(default_factory=dict)

    def count(self, name: str, label: str = "") -> int:
        return self.counts[(name, label)]

    def _observe(self, name: str, value: float) -> None:
        self.observed.setdefault(name, []).append(value)

    def job_requested(self, *, duplicate: bool) -> None:
        self.counts[("requested", "duplicate" if duplicate else "created")] += 1

    def job_completed(self, *, seconds: float, rows: int, size_bytes: int) -> None:
        self.counts[("completed", "")] += 1
        self._observe("duration_completed", seconds)
        self._observe("rows", rows)
        self._observe("bytes", size_bytes)

    def job_failed(self, reason: FailureReason, *, seconds: float | None = None) -> None:
        self.counts[("failed", FailureReason(reason).value)] += 1
        if seconds is not None:
            self._observe("duration_failed", seconds)

    def result_uploaded(self, seconds: float) -> None:
        self._observe("upload", seconds)

    def publish_failed(self, kind: MessageKind) -> None:
        self.counts[("publish_failed", MessageKind(kind).value)] += 1

    def publish_retried(self, kind: MessageKind) -> None:
        self.counts[("publish_retried", MessageKind(kind).value)] += 1

    def lease_expired(self) -> None:
        self.counts[("lease_expired", "")] += 1

    def job_reclaimed(self) -> None:
        self.counts[("reclaimed", "")] += 1

    def follower_lag(self, follower: str, notifications: int) -> None:
        self.gauges[("lag", follower)] = max(0, notifications)

    def unroutable_held(self, kind: MessageKind, messages: int) -> None:
        self.gauges[("unroutable", MessageKind(kind).value)] = max(0, messages)

    def check_observed(self, dependency: str, status: str, milliseconds: float) -> None:
        self.counts[("check", f"{dependency}:{status}")] += 1
        self._observe(f"check_{dependency}", milliseconds)

    def self_probe(self, dependency: str, *, up: bool) -> None:
        self.gauges[("self_probe", dependency)] = 1 if up else 0
