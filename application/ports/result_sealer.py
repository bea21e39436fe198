from __future__ import annotations

from typing import Protocol


class SealingStream(Protocol):
    """Incremental HMAC-SHA256 (external key) over the plaintext and AES-256-GCM (storage key)
    of it, emitted as the base64 text of ``nonce || ciphertext || tag``.

    ``update`` returns the base64 bytes that are ready (possibly empty); ``finish`` returns the
    rest, tag included. The concatenation of all outputs is byte-identical to a one-shot
    ``base64(nonce || AESGCM.encrypt(nonce, plaintext, None))``.
    """

    def update(self, plaintext: bytes) -> bytes: ...

    def finish(self) -> bytes: ...

    @property
    def hmac_hex(self) -> str:
        """Lower-case hex HMAC of all plaintext; valid after ``finish``."""
        ...

    @property
    def plaintext_size(self) -> int: ...


class ResultSealer(Protocol):
    def start(self) -> SealingStream: ...
