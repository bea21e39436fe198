"""AES-256-GCM encryption of credentials at rest, byte-compatible with the reference (§3.4)."""

from __future__ import annotations

import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.crypto.keys import KeyRing, decode_std_base64
from application.errors import CredentialKeyMissing, PortError
from application.ports.credential_cipher import CredentialCipher
from domain.connection import SealedSecret

NONCE_SIZE = 12
TAG_SIZE = 16


class CredentialDecryptionFailed(PortError):
    """A stored secret could not be decrypted: it was altered, or sealed with another key."""

    default_message = "stored credential could not be decrypted"


class AesGcmCredentialCipher(CredentialCipher):
    """Seals with the ring's current credentials key; opens with the version recorded."""

    def __init__(self, ring: KeyRing) -> None:
        self._ring = ring
        self._sealer = AESGCM(ring.current.credentials)

    @property
    def current_version(self) -> str:
        return self._ring.current.version

    def seal(self, plaintext: str) -> SealedSecret:
        nonce = os.urandom(NONCE_SIZE)
        sealed = self._sealer.encrypt(nonce, plaintext.encode("utf-8"), None)
        return SealedSecret(
            ciphertext=binascii.b2a_base64(nonce + sealed, newline=False).decode("ascii"),
            key_version=self._ring.current.version,
        )

    def open(self, secret: SealedSecret) -> str:
        keys = self._ring.get(secret.key_version)
        if keys is None:
            raise CredentialKeyMissing(secret.key_version)
        try:
            raw = decode_std_base64(secret.ciphertext)
        except ValueError:
            raise CredentialDecryptionFailed(
                "stored credential could not be decrypted: invalid base64"
            ) from None
        if len(raw) < NONCE_SIZE + TAG_SIZE:
            raise CredentialDecryptionFailed("stored credential could not be decrypted: too short")
        try:
            plain = AESGCM(keys.credentials).decrypt(raw[:NONCE_SIZE], raw[NONCE_SIZE:], None)
            return plain.decode("utf-8")
        except (InvalidTag, UnicodeDecodeError):
            raise CredentialDecryptionFailed(
                "stored credential could not be decrypted: authentication failed"
            ) from None
