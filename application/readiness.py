"""Readiness and liveness of one process (reference §7), over the checks of the ports it uses.

- ``report()`` runs every dependency's check at once, each within its own deadline, and says
  whether the process can take traffic; while draining it answers at once with the one
  ``draining`` check instead. Nothing is cached; reports asked for at the same moment share
  the checks then running.
- ``self_probe()`` runs the same checks for liveness: the process is live once they all
  passed. The reference probes once at start, so a dependency that was down then keeps
  liveness failing until a restart; ``probe_until_live`` repeats the probe with backoff until
  it passes, and a later outage shows on readiness only (restarting a process does not bring
  its database back).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from tenacity import AsyncRetrying, retry_if_result, wait_exponential

from application.ports.metrics import NO_METRICS, ReadinessMetrics
from application.retrying import sleep_unless
from domain.redaction import redact

Check = Callable[[], Awaitable[None]]
"""Raises when the dependency cannot be used; returns when it can."""

CHECK_TIMEOUT_SECONDS = 2.0
"""The reference's deadline for every kind of dependency this service has."""
TIMEOUT_ERROR = "check timeout: context deadline exceeded"
MAX_ERROR_BYTES = 512
DRAINING = "draining"
DRAINING_REASON = "graceful drain in progress"


class Status(StrEnum):
    UP = "up"
    DOWN = "down"
    DEGRADED = "degraded"
    SKIPPED = "skipped"
    NOT_APPLICABLE = "n/a"


PASSING = frozenset({Status.UP, Status.SKIPPED, Status.NOT_APPLICABLE})
LIVE = PASSING | {Status.DEGRADED}
"""What the self-probe accepts: a degraded dependency answers, so restarting the process
would not help (readiness still reports it)."""


class Degraded(Exception):
    """Raised by a check whose dependency answers but cannot do all it should: readiness
    reports the check ``degraded`` with this message (the process is not ready), liveness
    counts it as passing. The message says what to do, and holds no secret."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """Something the process needs, named for its kind (``postgres``, ``rabbitmq``, ``s3``...).
    ``tls`` is the configured transport security, when it applies."""

    name: str
    check: Check
    timeout: float = CHECK_TIMEOUT_SECONDS
    tls: bool | None = None


@dataclass(frozen=True, slots=True)
class CheckResult:
    status: Status
    latency_ms: int | None = None
    """Milliseconds the check took (``None``: it did not run)."""
    error: str | None = None
    """Why it is down, without secrets or addresses, at most 512 bytes."""
    reason: str | None = None
    """Why it was not run (``draining``, ``skipped``, ``n/a``)."""
    tls: bool | None = None

    @property
    def passing(self) -> bool:
        return self.status in PASSING


@dataclass(frozen=True, slots=True)
class ReadinessReport:
    checks: Mapping[str, CheckResult]
    version: str
    deployment_mode: str

    @property
    def healthy(self) -> bool:
        """Every check passed (``up``, ``skipped`` or ``n/a``)."""
        return all(check.passing for check in self.checks.values())


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_PASSWORD = re.compile(r"\b(password|passwd|pwd)=[^\s&;,]*", re.IGNORECASE)


def sanitize(text: str) -> str:
    """An error text as readiness shows it: user info and password values masked as the
    reference does, then addresses and URLs redacted, then cut to 512 bytes."""
    text = _PASSWORD.sub(r"\1=***", _USERINFO.sub("***@", text))
    encoded = redact(text).encode("utf-8")[:MAX_ERROR_BYTES]
    return encoded.decode("utf-8", errors="ignore")


class Readiness:
    """The readiness and liveness of one process over ``dependencies``; ``version`` and
    ``deployment_mode`` are reported as they are. Checks run on every ``report`` and are
    counted in ``metrics``."""

    def __init__(
        self,
        dependencies: Sequence[Dependency] = (),
        *,
        metrics: ReadinessMetrics = NO_METRICS,
        version: str = "unknown",
        deployment_mode: str = "local",
    ) -> None:
        self.dependencies = tuple(dependencies)
        self.version = version
        self.deployment_mode = deployment_mode
        self._metrics = metrics
        self._draining = False
        self._live = not self.dependencies
        self._running: dict[Dependency, asyncio.Future[CheckResult]] = {}

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def live(self) -> bool:
        """The self-probe passed (at once for a process with nothing to check)."""
        return self._live

    def use(self, dependencies: Sequence[Dependency]) -> None:
        """Checks ``dependencies`` from now on (a process that waited for its dependencies
        checks, once started, the adapters it opened); liveness and draining are kept."""
        self.dependencies = tuple(dependencies)

    def start_draining(self) -> None:
        """From now on, readiness answers ``draining`` (the process is shutting down)."""
        self._draining = True

    async def report(self, dependencies: Sequence[Dependency] | None = None) -> ReadinessReport:
        """Readiness over ``dependencies`` (by default this process's own): each check's
        result, or the ``draining`` check alone once draining has started."""
        if self._draining:
            self._metrics.check_observed(DRAINING, Status.DOWN, 0)
            drain = CheckResult(Status.DOWN, reason=DRAINING_REASON)
            return self._report({DRAINING: drain})
        checks = await self._run(self.dependencies if dependencies is None else dependencies)
        for name, result in checks.items():
            self._metrics.check_observed(name, result.status, result.latency_ms or 0)
        return self._report(checks)

    async def self_probe(self) -> bool:
        """Runs every check once for liveness, sets the self-probe series, and returns (and
        remembers) whether they all passed."""
        checks = await self._run(self.dependencies)
        for name, result in checks.items():
            self._metrics.self_probe(name, up=result.status in LIVE)
        passed = all(result.status in LIVE for result in checks.values())
        if passed:
            self._live = True
        return passed

    async def probe_until_live(
        self, stop: asyncio.Event, *, interval: float = 2.0, max_interval: float = 30.0
    ) -> None:
        """Repeats the self-probe, backing off from ``interval`` to ``max_interval``, until it
        passes or ``stop`` is set."""
        retrying = AsyncRetrying(
            retry=retry_if_result(lambda live: live is False),
            wait=wait_exponential(multiplier=interval, max=max_interval),
            sleep=sleep_unless(stop),
        )
        await retrying(self._probe_unless, stop)

    async def _probe_unless(self, stop: asyncio.Event) -> bool | None:
        """Whether the self-probe passed; None (no more tries) once live or stopped."""
        if self._live or stop.is_set():
            return None
        return await self.self_probe()

    def _report(self, checks: Mapping[str, CheckResult]) -> ReadinessReport:
        return ReadinessReport(checks, self.version, self.deployment_mode)

    async def _run(self, dependencies: Sequence[Dependency]) -> dict[str, CheckResult]:
        results = await asyncio.gather(*(self._shared_check(d) for d in dependencies))
        return {d.name: result for d, result in zip(dependencies, results, strict=True)}

    async def _shared_check(self, dependency: Dependency) -> CheckResult:
        """The dependency's check, or the one already running for it: a burst of probes
        costs the dependency one check at a time. A caller that goes away leaves it running
        for the others."""
        running = self._running.get(dependency)
        if running is None:
            running = asyncio.ensure_future(_check(dependency))
            self._running[dependency] = running
            running.add_done_callback(lambda _: self._running.pop(dependency, None))
        return await asyncio.shield(running)


async def _check(dependency: Dependency) -> CheckResult:
    started = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        await asyncio.wait_for(dependency.check(), dependency.timeout)
    except TimeoutError:
        return CheckResult(Status.DOWN, elapsed_ms(), TIMEOUT_ERROR, tls=dependency.tls)
    except Degraded as error:
        text = sanitize(str(error)) or type(error).__name__
        return CheckResult(Status.DEGRADED, elapsed_ms(), text, tls=dependency.tls)
    except Exception as error:
        text = sanitize(str(error)) or type(error).__name__
        return CheckResult(Status.DOWN, elapsed_ms(), text, tls=dependency.tls)
    return CheckResult(Status.UP, elapsed_ms(), tls=dependency.tls)
