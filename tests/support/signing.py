"""A message signer for tests (reference §5.5), written apart from the production one so that
each checks the other."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping

from adapters.messaging.wire.envelope import header_text
from application.errors import InvalidSignature
from application.ports.signer import MessageSigner

KEY = bytes(range(32))


class HmacTestSigner(MessageSigner):
    """A minimal §5.5 signer for tests, independent of the production one."""

    def __init__(self, key: bytes = KEY) -> None:
        self.key = key
        self.calls: list[dict[str, object]] = []

    def _mac(self, t: str, tenant: str, exchange: str, routing_key: str, body: bytes) -> str:
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        job = document.get("jobId") if isinstance(document, dict) else None
        job = job if isinstance(job, str) else ""
        payload = f"{t}\nv1\n{tenant}\n{job}\n{exchange}\n{routing_key}\n".encode() + body
        return hmac.new(self.key, payload, hashlib.sha256).hexdigest()

    def sign(
        self, *, tenant: str, exchange: str, routing_key: str, body: bytes, timestamp: int
    ) -> dict[str, str]:
        self.calls.append(
            {"tenant": tenant, "exchange": exchange, "routing_key": routing_key, "body": body}
        )
        mac = self._mac(str(timestamp), tenant, exchange, routing_key, body)
        return {"x-message-signature": mac, "t": str(timestamp), "signature-version": "v1"}

    def verify(
        self,
        *,
        headers: Mapping[str, object],
        exchange: str,
        routing_key: str,
        body: bytes,
        now: int,
        max_age: int | None,
    ) -> None:
        signature = header_text(headers.get("x-message-signature"))
        t = header_text(headers.get("t"))
        if (
            not signature
            or not t.isdigit()
            or header_text(headers.get("signature-version")) != "v1"
        ):
            raise InvalidSignature("missing or malformed signature headers")
        if int(t) > now + 30 or (max_age is not None and now - int(t) > max_age):
            raise InvalidSignature("stale signature")
        tenant = header_text(headers.get("X-Tenant-ID"))
        expected = self._mac(t, tenant, exchange, routing_key, body)
        if not hmac.compare_digest(expected, signature):
            raise InvalidSignature("signature mismatch")
