from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import UUID


class Clock(Protocol):
    """Current time, always timezone-aware UTC."""

    def now(self) -> datetime: ...


class IdGenerator(Protocol):
    """New ids (UUIDv7 in production: time-ordered)."""

    def new_id(self) -> UUID: ...
