"""Ed25519 keys that sign audit checkpoints.

The signing key is derived from each master key version with HKDF
(``fetcher-audit-signing-v1``, 32 bytes as the Ed25519 seed) unless a key is configured
(``AUDIT_SIGNING_KEY``: a base64 Ed25519 private key seed). A key id names the key version
and a fingerprint of its public key, so checkpoints verify after rotation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from adapters.crypto.keys import KeyRing
from application.ports.audit import CheckpointKeys, CheckpointSigner, SignatureCheck

CONFIGURED_VERSION = "configured"


class InvalidAuditKey(ValueError):
    """An audit key that cannot be used. The message never contains the key."""


def public_bytes(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def fingerprint(public: Ed25519PublicKey) -> str:
    return hashlib.sha256(public_bytes(public)).hexdigest()[:16]


def key_id_of(version: str, public: Ed25519PublicKey) -> str:
    return f"{version}.{fingerprint(public)}"


def encode_public(public: Ed25519PublicKey) -> str:
    return base64.b64encode(public_bytes(public)).decode("ascii")


def decode_public(text: str) -> Ed25519PublicKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidAuditKey("an audit public key is not base64") from None
    if len(raw) != 32:
        raise InvalidAuditKey(f"an audit public key has {len(raw)} bytes, not 32")
    return Ed25519PublicKey.from_public_bytes(raw)


def decode_private(text: str) -> Ed25519PrivateKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidAuditKey("AUDIT_SIGNING_KEY is not base64") from None
    if len(raw) != 32:
        raise InvalidAuditKey(f"AUDIT_SIGNING_KEY has {len(raw)} bytes, not 32")
    return Ed25519PrivateKey.from_private_bytes(raw)


class Ed25519CheckpointSigner(CheckpointSigner):
    __slots__ = ("_key", "_key_id")

    def __init__(self, key: Ed25519PrivateKey, version: str) -> None:
        self._key = key
        self._key_id = key_id_of(version, key.public_key())

    @property
    def key_id(self) -> str:
        return self._key_id

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._key.public_key()

    def sign(self, message: bytes) -> str:
        return base64.b64encode(self._key.sign(message)).decode("ascii")

    def __repr__(self) -> str:
        return f"Ed25519CheckpointSigner(key_id={self._key_id!r})"


class Ed25519CheckpointKeys(CheckpointKeys):
    """Public keys by key id."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[tuple[str, Ed25519PublicKey]]) -> None:
        self._keys: dict[str, Ed25519PublicKey] = dict(keys)

    @classmethod
    def of_public(cls, publics: Iterable[Ed25519PublicKey]) -> Ed25519CheckpointKeys:
        """Keys given only as public keys (offline): matched by fingerprint, any version."""
        return cls((fingerprint(p), p) for p in publics)

    def check(self, key_id: str, message: bytes, signature: str) -> SignatureCheck:
        public = self._keys.get(key_id) or self._keys.get(key_id.rpartition(".")[2])
        if public is None:
            return SignatureCheck.UNKNOWN_KEY
        try:
            public.verify(base64.b64decode(signature, validate=True), message)
        except (InvalidSignature, binascii.Error, ValueError):
            return SignatureCheck.INVALID
        return SignatureCheck.VALID

    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)


class AuditKeys:
    """The signer (current key) and every public key (all versions) of a key ring, or of the
    configured key."""

    def __init__(
        self, signer: Ed25519CheckpointSigner, publics: Mapping[str, Ed25519PublicKey]
    ) -> None:
        self.signer = signer
        self.publics = dict(publics)
        self.keys = Ed25519CheckpointKeys(self.publics.items())

    @classmethod
    def from_ring(cls, ring: KeyRing, configured: str | None = None) -> AuditKeys:
        """The current key version signs (or the configured key); every version verifies."""
        publics: dict[str, Ed25519PublicKey] = {}
        for keys in ring:
            public = Ed25519PrivateKey.from_private_bytes(keys.audit_signing).public_key()
            publics[key_id_of(keys.version, public)] = public
        if configured:
            signer = Ed25519CheckpointSigner(decode_private(configured), CONFIGURED_VERSION)
            publics = {signer.key_id: signer.public_key, **publics}
        else:
            current = ring.current
            signer = Ed25519CheckpointSigner(
                Ed25519PrivateKey.from_private_bytes(current.audit_signing), current.version
            )
        return cls(signer, publics)
