from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from uuid import UUID

from application.ports.clock import Clock, IdGenerator


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)


def uuid7() -> UUID:
    """RFC 9562 UUIDv7: 48-bit Unix milliseconds, then random bits (Python 3.11 has none)."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return UUID(int=value)


class Uuid7Generator(IdGenerator):
    def new_id(self) -> UUID:
        return uuid7()
