"""HMAC-SHA256 envelope signatures over the reference's six-line payload (§5.5)."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from adapters.crypto.keys import KeyRing
from adapters.messaging.wire.envelope import TENANT_HEADER
from application.errors import InvalidSignature
from application.ports.signer import MessageSigner

SIGNATURE_HEADER = "x-message-signature"
TIMESTAMP_HEADER = "t"
VERSION_HEADER = "signature-version"
SIGNATURE_VERSION = "v1"
MAX_FUTURE_SKEW_SECONDS = 30
MIN_KEY_LENGTH = 32

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> object:
    raise ValueError(name)


def _go_number(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError("number out of range")
    return number


def body_job_id(body: bytes) -> str:
    """The top-level string ``jobId`` of a JSON object body, else ``""`` (as Go decodes it)."""
    try:
        doc = json.loads(
            body.decode("utf-8", "replace"),
            parse_constant=_reject_constant,
            parse_float=_go_number,
            parse_int=_go_number,
        )
    except (ValueError, RecursionError):
        return ""
    if isinstance(doc, dict):
        job_id = doc.get("jobId")
        if isinstance(job_id, str):
            return job_id
    return ""


def signature_payload(
    *,
    timestamp: int,
    tenant: str,
    job_id: str,
    exchange: str,
    routing_key: str,
    body: bytes,
    version: str = SIGNATURE_VERSION,
) -> bytes:
    """``<t>\\n<version>\\n<tenant>\\n<jobId>\\n<exchange>\\n<routingKey>\\n<body>``."""
    head = "\n".join((str(timestamp), version, tenant, job_id, exchange, routing_key, ""))
    try:
        encoded = head.encode("utf-8")
    except UnicodeEncodeError:
        encoded = _SURROGATES.sub("\ufffd", head).encode("utf-8")
    return encoded + body


def _envelope_payload(
    timestamp: int, tenant: str, exchange: str, routing_key: str, body: bytes
) -> bytes:
    """The payload of a message: its job id is the body's own ``jobId``."""
    return signature_payload(
        timestamp=timestamp,
        tenant=tenant,
        job_id=body_job_id(body),
        exchange=exchange,
        routing_key=routing_key,
        body=body,
    )


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _timestamp(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    else:
        text = _text(value)
        if text is None or not _DECIMAL.fullmatch(text):
            return None
        number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


class HmacMessageSigner(MessageSigner):
    """Signs with the first key and verifies with any of them (newest first)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a message signer needs at least one key")
        if any(len(key) < MIN_KEY_LENGTH for key in keys):
            raise ValueError(f"signing keys must be at least {MIN_KEY_LENGTH} bytes")
        self._keys = tuple(bytes(key) for key in keys)

    @classmethod
    def from_ring(
        cls, ring: KeyRing, purpose: Literal["internal", "external"]
    ) -> HmacMessageSigner:
        """Internal keys sign job messages; external keys sign published events."""
        if purpose == "internal":
            return cls([keys.internal_hmac for keys in ring])
        if purpose == "external":
            return cls([keys.external_hmac for keys in ring])
        raise ValueError(f"unknown signing purpose: {purpose!r}")

    def __repr__(self) -> str:
        return f"HmacMessageSigner(keys={len(self._keys)})"

    def sign(
        self, *, tenant: str, exchange: str, routing_key: str, body: bytes, timestamp: int
    ) -> dict[str, str]:
        payload = _envelope_payload(timestamp, tenant, exchange, routing_key, body)
        return {
            SIGNATURE_HEADER: hmac.new(self._keys[0], payload, hashlib.sha256).hexdigest(),
            TIMESTAMP_HEADER: str(timestamp),
            VERSION_HEADER: SIGNATURE_VERSION,
        }

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
        if SIGNATURE_HEADER not in headers:
            raise InvalidSignature("missing signature header")
        signature = _text(headers[SIGNATURE_HEADER])
        if signature is None:
            raise InvalidSignature("invalid signature header")
        if TIMESTAMP_HEADER not in headers:
            raise InvalidSignature("missing timestamp header")
        timestamp = _timestamp(headers[TIMESTAMP_HEADER])
        if timestamp is None:
            raise InvalidSignature("invalid timestamp header")
        if VERSION_HEADER not in headers:
            raise InvalidSignature("missing signature version header")
        version = _text(headers[VERSION_HEADER])
        if version is None:
            raise InvalidSignature("invalid signature version header")
        if timestamp - now > MAX_FUTURE_SKEW_SECONDS:
            raise InvalidSignature("signature timestamp is in the future")
        if max_age is not None and now - timestamp > max_age:
            raise InvalidSignature("signature has expired")
        if version != SIGNATURE_VERSION:
            raise InvalidSignature("unsupported signature version")
        tenant_value = headers.get(TENANT_HEADER)
        tenant = "" if tenant_value is None else _text(tenant_value)
        if tenant is None:
            raise InvalidSignature("invalid tenant header")

        payload = _envelope_payload(timestamp, tenant, exchange, routing_key, body)
        given = signature.encode("utf-8")
        matched = False
        for key in self._keys:
            expected = hmac.new(key, payload, hashlib.sha256).hexdigest().encode("ascii")
            matched |= hmac.compare_digest(expected, given)
        if not matched:
            raise InvalidSignature("signature mismatch")
