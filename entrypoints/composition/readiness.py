"""Readiness: the dependencies a role is checked on, before it starts and once it runs.

Before: the dial checks of ``needed_by`` (nothing opened yet). After: the checks of what
bootstrap opened (``database_dependency`` and the others), under the same names.

Waiting for the dependencies a role needs before it starts:

A role started while its database, broker or result storage is down does not exit (under an
orchestrator that is a crash loop): it says once what it waits for, tries again with backoff,
says once when it is reachable, and reports not ready meanwhile (``starting_readiness``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from tenacity import AsyncRetrying, retry_if_result, wait_exponential

from adapters.common.postgres import reach
from adapters.messaging.rabbitmq_probe import reach_broker
from adapters.messaging.unroutable import UnroutableMessages
from adapters.metrics.prometheus import PrometheusMetrics
from application.errors import StorageRejected
from application.readiness import CHECK_TIMEOUT_SECONDS, Check, Dependency, Readiness, sanitize
from application.retrying import sleep_unless
from entrypoints.composition.infrastructure import reach_result_storage
from entrypoints.roles import FOLLOWERS, Probes, Role
from entrypoints.settings import Settings

log = logging.getLogger("fetcher")

FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
"""Between two attempts at a dependency that is down: from 1 s, doubling, up to 30 s."""


@dataclass(frozen=True, slots=True)
class Needed:
    """A dependency a role waits for: its readiness ``dependency`` (named as on ``/readyz``,
    its check only dials), what it is and where, for the log lines."""

    dependency: Dependency
    what: str
    where: str


def _where(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{parts.port}" if parts.port else host


def needed_by(settings: Settings, roles: Collection[Role]) -> list[Needed]:
    """What ``roles`` cannot start without, in the order bootstrap opens it: the service's
    PostgreSQL, the broker, and (for the worker) S3 result storage, each named as once it is
    open, with a check that only dials. The embedded twins (SQLite files, in-process queue,
    results folder) are never waited for."""
    needed: list[Needed] = []
    database = settings.database.postgres
    if database is not None:

        async def database_check() -> None:
            await reach(database, timeout=CHECK_TIMEOUT_SECONDS)

        where = f"{database.host}:{database.port}"
        dependency = database_dependency(settings, database_check)
        needed.append(Needed(dependency, "the database", where))
    url = settings.broker.url
    if url:

        async def broker_check() -> None:
            await reach_broker(url, timeout=CHECK_TIMEOUT_SECONDS)

        broker = broker_dependency(settings, broker_check)
        if broker is not None:
            needed.append(Needed(broker, "the message broker", _where(url)))
    storage = settings.storage
    if Role.WORKER in roles and storage.uses_s3:

        async def storage_check() -> None:
            await reach_result_storage(settings)

        endpoint = storage.endpoint
        where = _where(endpoint) if endpoint else "its default endpoint"
        dependency = storage_dependency(settings, storage_check)
        needed.append(Needed(dependency, "result storage", where))
    return needed


def cause_of(error: BaseException) -> str:
    """The innermost cause's first line, free of secrets and addresses; a storage refusal
    (a missing bucket, access denied) is said in its own words, which name the fix, rather
    than as the HTTP status under it."""
    while error.__cause__ is not None and not isinstance(error, StorageRejected):
        error = error.__cause__
    text = (str(error).strip().splitlines() or [""])[0]
    return sanitize(text) or type(error).__name__


class DependencyWaiter:
    """Tries each needed dependency in turn until all answer, backing off while one is down.
    Each change of state is one log line: ``waiting for the message broker at host:port
    (cause)`` when it is found down, ``the message broker at host:port is reachable`` when it
    answers again."""

    def __init__(
        self,
        needed: Sequence[Needed],
        *,
        first_retry: float = FIRST_RETRY_SECONDS,
        max_retry: float = MAX_RETRY_SECONDS,
    ) -> None:
        self.needed = tuple(needed)
        self._first_retry = first_retry
        self._max_retry = max_retry
        self._down: set[str] = set()

    @property
    def dependencies(self) -> list[Dependency]:
        return [each.dependency for each in self.needed]

    async def reachable(self) -> bool:
        """Tries every dependency once (logging what changed): whether all answered."""
        results = [await self._try(each) for each in self.needed]
        return all(results)

    async def wait(self, stop: asyncio.Event) -> bool:
        """Returns ``True`` once every dependency answered, ``False`` if ``stop`` was set
        first."""
        for each in self.needed:
            retrying = AsyncRetrying(
                retry=retry_if_result(lambda reached: reached is False),
                wait=wait_exponential(multiplier=self._first_retry, max=self._max_retry),
                sleep=sleep_unless(stop),
            )
            if not await retrying(self._try_unless, each, stop):
                return False
        return not stop.is_set()

    async def _try_unless(self, needed: Needed, stop: asyncio.Event) -> bool | None:
        """Whether ``needed`` answered; None (no more tries) once ``stop`` is set."""
        return None if stop.is_set() else await self._try(needed)

    async def _try(self, needed: Needed) -> bool:
        dependency = needed.dependency
        try:
            await asyncio.wait_for(dependency.check(), dependency.timeout)
        except Exception as error:
            if dependency.name not in self._down:
                self._down.add(dependency.name)
                cause = "no answer in time" if isinstance(error, TimeoutError) else cause_of(error)
                log.warning("waiting for %s at %s (%s)", needed.what, needed.where, cause)
            return False
        if dependency.name in self._down:
            self._down.discard(dependency.name)
            log.info("%s at %s is reachable", needed.what, needed.where)
        return True


def database_dependency(settings: Settings, check: Check) -> Dependency:
    """The service's database, through ``check`` (the event store's once open; the SQL
    adapters share the database): ``postgres``, or ``sqlite`` on the embedded default."""
    name = "postgres" if settings.database.postgres is not None else "sqlite"
    return Dependency(name, check)


def broker_dependency(settings: Settings, *checks: Check) -> Dependency | None:
    """The broker, through ``checks`` (a dial before start; once open, the publishers' own or
    a ``RabbitBrokerProbe``'s):
    ``rabbitmq``, or ``local_broker`` for the in-process queue and events file of the
    embedded default (with nothing to check there, none)."""
    if not checks:
        return None
    url = settings.broker.url
    if url is None:
        return Dependency("local_broker", _all(checks))
    return Dependency("rabbitmq", _all(checks), tls=url.startswith("amqps:"))


def storage_dependency(settings: Settings, check: Check) -> Dependency:
    """Result storage, through ``check`` (the storage's own once open): ``s3`` (its bucket),
    or ``local_storage`` for the results folder."""
    config = settings.storage
    if not config.uses_s3:
        return Dependency("local_storage", check)
    endpoint = config.endpoint
    return Dependency("s3", check, tls=endpoint is None or endpoint.startswith("https:"))


def _all(checks: tuple[Check, ...]) -> Check:
    async def check() -> None:
        for each in checks:
            await each()

    return check


def process_metrics(roles: Collection[Role]) -> PrometheusMetrics:
    """The one metrics registry of a process running ``roles``."""
    return PrometheusMetrics(followers=FOLLOWERS if Role.RELAY in roles else ())


STARTING = "starting"


async def _still_starting() -> None:
    raise RuntimeError("the role has not started yet")


def starting_probes(
    settings: Settings, waiter: DependencyWaiter, metrics: PrometheusMetrics
) -> Probes:
    """The probes of a process still starting: readiness over its dependencies' dial checks
    and a ``starting`` check that is down until the role has started (once they answer,
    opening the adapters still takes a moment); not live until then either."""
    return probes_of(
        settings, [*waiter.dependencies, Dependency(STARTING, _still_starting)], metrics
    )


def probes_of(
    settings: Settings, dependencies: Sequence[Dependency], metrics: PrometheusMetrics
) -> Probes:
    """The probes of a process that started: readiness over what it opened."""
    readiness = Readiness(
        dependencies,
        metrics=metrics,
        version=settings.probes.version,
        deployment_mode=settings.probes.deployment_mode,
    )
    return Probes(readiness, metrics, settings.tenancy.tenancy)


def routing_dependency(unroutable: UnroutableMessages) -> Dependency:
    """``rabbitmq_routing``: degraded while the broker returns messages no queue takes."""
    return Dependency("rabbitmq_routing", unroutable.check)
