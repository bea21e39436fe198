"""Listing connections: a page of them within a creation-date window."""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from application.connections.directory import ConnectionDirectory
from application.ports.clock import Clock
from application.ports.connection_repository import ConnectionPage, ConnectionQuery
from domain import error_catalogue as catalogue
from domain.errors import InvalidRequest
from domain.tenant import Tenant


@dataclass(frozen=True, slots=True)
class ListFilter:
    """A list request as the client gave it (dates are calendar days, UTC)."""

    page: int = 1
    limit: int = 10
    descending: bool = True
    product_name: str | None = None
    type: str | None = None
    start_date: date | None = None
    end_date: date | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


def _months_before(day: date, months: int) -> date:
    """``months`` calendar months before ``day``, never before ``date.min``."""
    month_index = day.year * 12 + day.month - 1 - months
    year, month = divmod(month_index, 12)
    if year < date.min.year:
        return date.min
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


def date_window(
    start: date | None, end: date | None, today: date, months: int
) -> tuple[datetime, datetime]:
    """The ``created_at`` window of reference §2.3, as UTC instants: by default the last
    ``months`` months up to the end of today; only a start means that one day; only an end
    starts ``months`` months before today; never wider than ``months`` months (a wider window
    keeps its end); FET-0409 when the start is after the end. Unlike the reference, the end
    day is included whole (the reference stops at its midnight)."""
    if start is None:
        end = end or today
        start = _months_before(today, months)
    elif end is None:
        end = start
    if start > end:
        raise InvalidRequest(entry=catalogue.INVALID_FINAL_DATE)
    if end == date.max:
        # the whole last day of the calendar: its end is the latest representable instant
        stop_at = datetime.max.replace(tzinfo=UTC)
        start = max(start, _months_before(end, months))
        return datetime.combine(start, time.min, UTC), stop_at
    stop = end + timedelta(days=1)
    start = max(start, _months_before(stop, months))
    return datetime.combine(start, time.min, UTC), datetime.combine(stop, time.min, UTC)


def stored_query(
    wanted: ListFilter, clock: Clock, max_months: int, *, unassigned: bool = False
) -> ConnectionQuery:
    created_from, created_to = date_window(
        wanted.start_date, wanted.end_date, clock.now().astimezone(UTC).date(), max_months
    )
    return ConnectionQuery(
        page=wanted.page,
        limit=wanted.limit,
        descending=wanted.descending,
        product_name=None if unassigned else wanted.product_name,
        type=wanted.type,
        created_from=created_from,
        created_to=created_to,
        metadata=dict(wanted.metadata),
        unassigned=unassigned,
    )


@dataclass(slots=True)
class ListConnections:
    """A page of ``tenant``'s stored connections created within the date window, filtered by
    product (when given), type and metadata values. Page 1 starts with the internal
    datasources the tenant sees (filtered by type only), which also count in ``total``."""

    directory: ConnectionDirectory
    clock: Clock
    max_months: int = 1

    async def __call__(self, wanted: ListFilter, *, tenant: Tenant) -> ConnectionPage:
        page = await self.directory.repository.list(
            stored_query(wanted, self.clock, self.max_months), tenant=tenant
        )
        if wanted.page != 1:
            return page
        kind = wanted.type.upper() if wanted.type else None
        internal = [
            c
            for _, c in sorted(self.directory.internal_for(tenant).items())
            if kind in (None, c.type.value)
        ]
        return ConnectionPage(items=internal + page.items, total=page.total + len(internal))
