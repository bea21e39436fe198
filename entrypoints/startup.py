"""Waiting for the dependencies a role needs before it starts.

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
from application.readiness import CHECK_TIMEOUT_SECONDS, Dependency, sanitize
from application.retrying import sleep_unless
from entrypoints.infrastructure import reach_result_storage
from entrypoints.roles import Role
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
    PostgreSQL, the broker, and (for the worker) S3 result storage. The embedded twins (SQLite
    files, in-process queue, results folder) are never waited for."""
    needed: list[Needed] = []
    database = settings.database.postgres
    if database is not None:

        async def database_check() -> None:
            await reach(database, timeout=CHECK_TIMEOUT_SECONDS)

        where = f"{database.host}:{database.port}"
        needed.append(Needed(Dependency("postgres", database_check), "the database", where))
    url = settings.broker.url
    if url:

        async def broker_check() -> None:
            await reach_broker(url, timeout=CHECK_TIMEOUT_SECONDS)

        tls = url.startswith("amqps:")
        dependency = Dependency("rabbitmq", broker_check, tls=tls)
        needed.append(Needed(dependency, "the message broker", _where(url)))
    storage = settings.storage
    if Role.WORKER in roles and storage.uses_s3:

        async def storage_check() -> None:
            await reach_result_storage(settings)

        endpoint = storage.endpoint
        tls = endpoint is None or endpoint.startswith("https:")
        where = _where(endpoint) if endpoint else "its default endpoint"
        needed.append(Needed(Dependency("s3", storage_check, tls=tls), "result storage", where))
    return needed


def _cause(error: BaseException) -> str:
    """The innermost cause's first line, free of secrets and addresses."""
    while error.__cause__ is not None:
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
                cause = "no answer in time" if isinstance(error, TimeoutError) else _cause(error)
                log.warning("waiting for %s at %s (%s)", needed.what, needed.where, cause)
            return False
        if dependency.name in self._down:
            self._down.discard(dependency.name)
            log.info("%s at %s is reachable", needed.what, needed.where)
        return True
