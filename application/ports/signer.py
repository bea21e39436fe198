from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class MessageSigner(Protocol):
    """HMAC-SHA256 envelope signatures over the reference's six-line payload (§5.5):
    ``<t>\\n<version>\\n<tenantId>\\n<jobId>\\n<exchange>\\n<routingKey>\\n<body>``, where
    ``jobId`` is the body's top-level string ``jobId`` (else empty).

    ``sign`` returns the headers ``x-message-signature`` (lower-case hex), ``t`` (Unix seconds
    as a decimal string) and ``signature-version`` (``v1``). ``verify`` raises
    ``application.errors.InvalidSignature`` with a safe reason; ``max_age`` of None skips the
    staleness check (a queued job does not expire), timestamps more than 30 s in the future
    are always refused. A key ring verifies with every configured key version.
    """

    def sign(
        self, *, tenant: str, exchange: str, routing_key: str, body: bytes, timestamp: int
    ) -> dict[str, str]: ...

    def verify(
        self,
        *,
        headers: Mapping[str, object],
        exchange: str,
        routing_key: str,
        body: bytes,
        now: int,
        max_age: int | None,
    ) -> None: ...
