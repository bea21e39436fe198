from __future__ import annotations

from typing import Protocol


class RateLimiter(Protocol):
    """Limits how often an action may run per key (connection tests: 10 a minute each).

    ``acquire`` takes one token for ``key`` and returns ``0.0``; when none is left it takes
    nothing and returns the seconds until one is available (always > 0). Keys are opaque
    strings (a connection id, ``tenant:<tenantId>:<connectionId>`` in multi-tenant mode);
    they are never secrets.
    """

    async def acquire(self, key: str) -> float: ...
