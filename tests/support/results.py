"""Opening a stored result as its reader would (reference §4.11), written apart from the
production sealer so that each checks the other: base64 of ``nonce || ciphertext || tag``,
AES-256-GCM with the storage key, then the plaintext's HMAC-SHA256 (external key) compared
with the event's ``result.hmac``."""

from __future__ import annotations

import base64
import hashlib
import hmac

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12


def open_sealed(blob: bytes, storage_key: bytes, hmac_key: bytes, expected_hmac: str) -> bytes:
    """The plaintext; raises ``cryptography.exceptions.InvalidTag`` for a blob that does not
    decrypt and ``ValueError`` for one whose HMAC does not match."""
    raw = base64.b64decode(b"".join(blob.split()), validate=True)
    plaintext = AESGCM(storage_key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], None)
    actual = hmac.new(hmac_key, plaintext, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(actual, expected_hmac.lower()):
        raise ValueError("the result does not match its HMAC")
    return plaintext
