"""A job index that catches up with the event log before it answers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from application.policies.follower import ProjectionFollower
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.job_index import JobIndex, JobSearch, JobSummary
from domain.tenant import Tenant


@dataclass(slots=True)
class FreshJobIndex(JobIndex):
    """Feeds the projection every event already in the log, then answers from it.

    ``fetcher api`` does not run the projection follower (the relay does), so a job recorded
    a moment ago, or any job while the relay is down, would otherwise be missing from
    "is this connection in use". The projection records its position with its rows and skips
    events it already has, so catching up here alongside the relay is safe.
    """

    index: JobIndex
    store: JobEventStore

    async def _catch_up(self) -> None:
        follower = ProjectionFollower(name="projection", store=self.store, index=self.index)
        while await follower.run_once():
            pass

    async def project(self, logged: Sequence[LoggedEvent], *, after: int | None = None) -> int:
        return await self.index.project(logged, after=after)

    async def position(self) -> int:
        return await self.index.position()

    async def is_connection_in_use(self, config_name: str, *, tenant: Tenant) -> bool:
        await self._catch_up()
        return await self.index.is_connection_in_use(config_name, tenant=tenant)

    async def stalled(
        self, *, now: datetime, pending_before: datetime, limit: int = 100
    ) -> list[JobSummary]:
        await self._catch_up()
        return await self.index.stalled(now=now, pending_before=pending_before, limit=limit)

    async def search(self, search: JobSearch) -> list[JobSummary]:
        await self._catch_up()
        return await self.index.search(search)

    async def check(self) -> None:
        await self.index.check()
