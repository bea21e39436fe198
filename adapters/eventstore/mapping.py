"""Events to stored bytes and back: the ``eventsourcing`` library's mapper and JSON transcoder
(pure, no I/O), shared by every event store so the stored bytes are the same everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar
from uuid import UUID

from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import (
    DatetimeAsISO,
    JSONTranscoder,
    Mapper,
    StoredEvent,
    UUIDAsHex,
)

T = TypeVar("T")


def new_mapper() -> Mapper[UUID]:
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    return Mapper(transcoder=transcoder)


def to_domain_event(mapper: Mapper[UUID], stored: StoredEvent) -> DomainEvent:
    event = mapper.to_domain_event(stored)
    if not isinstance(event, DomainEvent):
        raise TypeError(f"stored event {stored.topic!r} is not a domain event")
    return event


def decoded_stream(
    mapper: Mapper[UUID], originator_id: UUID, records: Sequence[StoredEvent], kind: type[T]
) -> list[T]:
    """One stream's stored events as events of ``kind`` (a stream of another kind is a
    ``TypeError``: ids of jobs and of request slots never mix)."""
    out: list[T] = []
    for stored in records:
        event = to_domain_event(mapper, stored)
        if not isinstance(event, kind):
            raise TypeError(f"{originator_id} holds a {type(event).__name__}")
        out.append(event)
    return out
