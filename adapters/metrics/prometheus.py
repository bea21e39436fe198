"""The service's metrics on prometheus-client, in a registry of their own (one per composition
root, so several in one test process never clash), with the process and garbage-collector
collectors of the library.

The three readiness series keep the reference's names, labels and buckets (§7.4); the others
are ``fetcher_*``. Label values come from fixed vocabularies, and each known combination is
created at start, so a series exists (at zero) before the first time it moves.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder

from application.ports.metrics import FailureReason, MessageKind, Metrics

READYZ_BUCKETS_MS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000)
JOB_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
UPLOAD_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
ROWS_BUCKETS = (0, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)
BYTES_BUCKETS = tuple(1 << shift for shift in (10, 14, 17, 20, 23, 26, 28, 30, 32))
"""1 KiB, 16 KiB, 128 KiB, 1 MiB, 8 MiB, 64 MiB, 256 MiB (the default limit), 1 GiB, 4 GiB."""


class PrometheusMetrics(Metrics):
    """Every series of the service, registered once in ``registry``."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        followers: Iterable[str] = (),
        process_collectors: bool = True,
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        r = self.registry
        if process_collectors:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        self._readyz_duration = Histogram(
            "readyz_check_duration_ms",
            "Duration of /readyz dependency checks in milliseconds.",
            ["dep", "status"],
            buckets=READYZ_BUCKETS_MS,
            registry=r,
        )
        self._readyz_status = Counter(
            "readyz_check_status",
            "Count of /readyz dependency check outcomes per dep and status.",
            ["dep", "status"],
            registry=r,
        )
        self._selfprobe = Gauge(
            "selfprobe_result",
            "Last start-up self-probe result per dependency (1=up, 0=down).",
            ["dep"],
            registry=r,
        )
        self._requested = Counter(
            "fetcher_jobs_requested",
            "Job requests accepted: a new job (created) or an existing one (duplicate).",
            ["outcome"],
            registry=r,
        )
        self._completed = Counter(
            "fetcher_jobs_completed", "Jobs whose result was stored.", registry=r
        )
        self._failed = Counter(
            "fetcher_jobs_failed",
            "Jobs recorded as failed, by reason class.",
            ["reason"],
            registry=r,
        )
        self._duration = Histogram(
            "fetcher_job_duration_seconds",
            "Time from a worker's claim to the job's recorded outcome.",
            ["outcome"],
            buckets=JOB_SECONDS_BUCKETS,
            registry=r,
        )
        self._rows = Histogram(
            "fetcher_job_result_rows",
            "Rows in a stored result.",
            buckets=ROWS_BUCKETS,
            registry=r,
        )
        self._bytes = Histogram(
            "fetcher_job_result_bytes",
            "Size of a stored (sealed) result in bytes.",
            buckets=BYTES_BUCKETS,
            registry=r,
        )
        self._upload = Histogram(
            "fetcher_result_upload_seconds",
            "Time a worker spent writing one result to object storage (parts and commit).",
            buckets=UPLOAD_SECONDS_BUCKETS,
            registry=r,
        )
        self._lease_expiries = Counter(
            "fetcher_lease_expiries",
            "Processing jobs the reaper found with an expired lease.",
            registry=r,
        )
        self._reclaims = Counter(
            "fetcher_job_reclaims",
            "Jobs with an expired lease the reaper dispatched again for another worker.",
            registry=r,
        )
        self._publish_failures = Counter(
            "fetcher_publish_failures",
            "Publishes refused or not confirmed by the broker, by message kind.",
            ["kind"],
            registry=r,
        )
        self._publish_retries = Counter(
            "fetcher_publish_retries",
            "Messages published again after a failed attempt, by message kind.",
            ["kind"],
            registry=r,
        )
        self._lag = Gauge(
            "fetcher_follower_lag_notifications",
            "Notifications of the event log a follower has still to handle.",
            ["follower"],
            registry=r,
        )
        self._unroutable = Gauge(
            "fetcher_unroutable_messages",
            "Messages the broker returned as unroutable (no queue bound for their routing "
            "key), held and published again until a queue takes them, by message kind.",
            ["kind"],
            registry=r,
        )
        for outcome in ("created", "duplicate"):
            self._requested.labels(outcome)
        for reason in FailureReason:
            self._failed.labels(reason.value)
        for outcome in ("completed", "failed"):
            self._duration.labels(outcome)
        for kind in MessageKind:
            self._publish_failures.labels(kind.value)
            self._publish_retries.labels(kind.value)
            self._unroutable.labels(kind.value)
        for follower in followers:
            self._lag.labels(follower)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The registry's current samples and their content type, in the format ``accept``
        asks for (Prometheus text by default, OpenMetrics on request)."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type

    def job_requested(self, *, duplicate: bool) -> None:
        self._requested.labels("duplicate" if duplicate else "created").inc()

    def job_completed(self, *, seconds: float, rows: int, size_bytes: int) -> None:
        self._completed.inc()
        self._duration.labels("completed").observe(seconds)
        self._rows.observe(rows)
        self._bytes.observe(size_bytes)

    def job_failed(self, reason: FailureReason, *, seconds: float | None = None) -> None:
        self._failed.labels(FailureReason(reason).value).inc()
        if seconds is not None:
            self._duration.labels("failed").observe(seconds)

    def result_uploaded(self, seconds: float) -> None:
        self._upload.observe(seconds)

    def publish_failed(self, kind: MessageKind) -> None:
        self._publish_failures.labels(MessageKind(kind).value).inc()

    def publish_retried(self, kind: MessageKind) -> None:
        self._publish_retries.labels(MessageKind(kind).value).inc()

    def lease_expired(self) -> None:
        self._lease_expiries.inc()

    def job_reclaimed(self) -> None:
        self._reclaims.inc()

    def follower_lag(self, follower: str, notifications: int) -> None:
        self._lag.labels(follower).set(max(0, notifications))

    def unroutable_held(self, kind: MessageKind, messages: int) -> None:
        self._unroutable.labels(MessageKind(kind).value).set(max(0, messages))

    def check_observed(self, dependency: str, status: str, milliseconds: float) -> None:
        self._readyz_duration.labels(dependency, status).observe(milliseconds)
        self._readyz_status.labels(dependency, status).inc()

    def self_probe(self, dependency: str, *, up: bool) -> None:
        self._selfprobe.labels(dependency).set(1 if up else 0)
