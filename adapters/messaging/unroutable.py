"""Messages the broker returned as unroutable, made visible: readiness, a gauge, a log line.

A ``mandatory`` publish that no queue takes comes back (basic.return) and fails, so the
message stays in the event log and is published again until some queue is bound. What was
returned is held here per destination (exchange and routing key) until a publish to that
destination is routed again: routing depends on the destination alone, so the first message
that goes through means the binding is there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from application.ports.metrics import NO_METRICS, MessageKind, RelayMetrics
from application.readiness import Degraded

logger = logging.getLogger(__name__)

LOG_REPEAT_SECONDS = 600.0
"""While a destination stays unroutable, its warning is repeated at most this often."""
MAX_HELD_IDS = 10_000
"""A bound on the message ids remembered per destination (the count stops growing there)."""

DEFAULT_REMEDY = "or have Fetcher declare its broker topology"


@dataclass(slots=True)
class _Destination:
    kind: MessageKind
    held: set[str] = field(default_factory=set)
    logged_at: float = 0.0


class UnroutableMessages:
    """What a process's publishers had returned, per destination. ``remedy`` ends each
    hint (the setting that declares the topology, as the composition root names it)."""

    def __init__(
        self,
        metrics: RelayMetrics = NO_METRICS,
        *,
        remedy: str = DEFAULT_REMEDY,
        repeat_seconds: float = LOG_REPEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._remedy = remedy
        self._repeat = repeat_seconds
        self._clock = clock
        self._destinations: dict[tuple[str, str], _Destination] = {}

    def returned(self, kind: MessageKind, exchange: str, routing_key: str, message: str) -> None:
        """The broker returned ``message`` (an id stable across its retries) published to
        ``exchange`` with ``routing_key``: held; the first time for this destination, and
        then at most every ``repeat_seconds``, one warning says what to bind."""
        destination = self._destinations.get((exchange, routing_key))
        if destination is None:
            destination = self._destinations[(exchange, routing_key)] = _Destination(kind)
        if len(destination.held) < MAX_HELD_IDS:
            destination.held.add(message)
        self._count(kind)
        now = self._clock()
        if destination.logged_at and now - destination.logged_at < self._repeat:
            return
        destination.logged_at = now
        logger.warning(
            "broker.unroutable: %s",
            self._describe(exchange, routing_key, destination),
            extra={"exchange": exchange or "(default)", "routing_key": routing_key},
        )

    def routed(self, exchange: str, routing_key: str) -> None:
        """A publish to this destination was routed: nothing is held for it any more."""
        if not self._destinations:
            return
        destination = self._destinations.pop((exchange, routing_key), None)
        if destination is None:
            return
        self._count(destination.kind)
        logger.info(
            "broker.routed: %s to %s are routed again",
            _noun(destination.kind, 2),
            _where(exchange, routing_key),
        )

    @property
    def held(self) -> int:
        return sum(len(d.held) for d in self._destinations.values())

    async def check(self) -> None:
        """Readiness: ``Degraded`` with what to bind while anything is held."""
        if not self._destinations:
            return
        raise Degraded(
            "; ".join(
                self._describe(exchange, key, destination)
                for (exchange, key), destination in sorted(self._destinations.items())
            )
        )

    def _count(self, kind: MessageKind) -> None:
        self._metrics.unroutable_held(
            kind, sum(len(d.held) for d in self._destinations.values() if d.kind == kind)
        )

    def _describe(self, exchange: str, routing_key: str, destination: _Destination) -> str:
        held = len(destination.held)
        what = f"{held} {_noun(destination.kind, held)} to {_where(exchange, routing_key)}"
        if exchange:
            fix = (
                f"bind a queue to exchange '{exchange}' with routing key '{routing_key}' "
                f"(or '#'), {self._remedy}"
            )
        else:
            fix = f"create queue '{routing_key}', {self._remedy}"
        return f"{what} reached no queue and {'is' if held == 1 else 'are'} held: {fix}"


def _noun(kind: MessageKind, count: int) -> str:
    noun = "job event" if kind is MessageKind.EVENT else "work order"
    return noun if count == 1 else f"{noun}s"


def _where(exchange: str, routing_key: str) -> str:
    if not exchange:
        return f"queue '{routing_key}'"
    return f"exchange '{exchange}' with routing key '{routing_key}'"
