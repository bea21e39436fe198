from __future__ import annotations

from typing import Protocol

from domain.connection import SealedSecret


class CredentialCipher(Protocol):
    """Encrypts secrets at rest (AES-256-GCM with the credentials key of a key ring).

    ``seal`` uses the newest key version; ``open`` uses the version recorded in the secret and
    raises ``application.errors.CredentialKeyMissing`` (naming the version, never the key) when
    that version is not configured. Plaintext is never logged.
    """

    def seal(self, plaintext: str) -> SealedSecret: ...

    def open(self, secret: SealedSecret) -> str: ...

    @property
    def current_version(self) -> str: ...
