"""The master key and the four keys derived from it (reference §1.3, §5.6), per key version.

A ``KeyRing`` holds the current master key (used to encrypt and sign) and any previous ones (still
used to decrypt and verify). Key material never appears in ``repr`` or in error messages.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

CREDENTIALS_INFO = "fetcher-credentials-v1"
INTERNAL_HMAC_INFO = "fetcher-internal-hmac-v1"
EXTERNAL_HMAC_INFO = "fetcher-external-hmac-v1"
STORAGE_ENCRYPTION_INFO = "fetcher-storage-encryption-v1"
AUDIT_SIGNING_INFO = "fetcher-audit-signing-v1"

DERIVED_KEY_LENGTH = 32
MIN_MASTER_KEY_LENGTH = 32
DEFAULT_KEY_VERSION = "1"

_STD_B64 = re.compile(r"[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


class InvalidMasterKey(ValueError):
    """The master key (or a previous key) is not usable. The message never contains the key."""


def derive(master: bytes, info: str) -> bytes:
    """HKDF-SHA256 (RFC 5869) with no salt and a 32-byte output."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=DERIVED_KEY_LENGTH, salt=None, info=info.encode())
    return hkdf.derive(master)


def decode_std_base64(text: str) -> bytes:
    """Strict standard base64 (padded), like Go's ``base64.StdEncoding`` (CR and LF ignored).

    Raises ``ValueError("illegal base64 data at input byte N")``; the text is never quoted.
    """
    s = text.replace("\r", "").replace("\n", "")
    if len(s) % 4 == 0 and _STD_B64.fullmatch(s):
        return base64.b64decode(s)
    position = next((i for i, c in enumerate(s) if c not in _B64_ALPHABET and c != "="), None)
    if position is None:
        position = len(s) - len(s) % 4 if len(s) % 4 else s.index("=")
    raise ValueError(f"illegal base64 data at input byte {position}")


def decode_master_key(text: str) -> bytes:
    """Decode a base64 master key and check it is at least 32 bytes long."""
    try:
        key = decode_std_base64(text.strip())
    except ValueError as e:
        raise InvalidMasterKey(f"invalid master key (base64): {e}") from None
    if len(key) < MIN_MASTER_KEY_LENGTH:
        raise InvalidMasterKey(
            f"master key too short: got {len(key)} bytes, minimum {MIN_MASTER_KEY_LENGTH} required"
        )
    return key


def generate_master_key() -> str:
    """A fresh random master key: 32 bytes, standard base64."""
    return base64.b64encode(os.urandom(MIN_MASTER_KEY_LENGTH)).decode("ascii")


def parse_previous_keys(text: str | None) -> dict[str, str]:
    """Parse ``"<version>:<base64>,<version>:<base64>"`` (``APP_ENC_KEYS_PREVIOUS``).

    Returns ``{version: base64 text}`` in the given order. Empty entries are skipped; an entry
    without a version or key, or a repeated version, raises ``InvalidMasterKey``.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for index, raw in enumerate(text.split(","), start=1):
        entry = raw.strip()
        if not entry:
            continue
        version, sep, key = entry.partition(":")
        version, key = version.strip(), key.strip()
        if not sep or not version or not key:
            raise InvalidMasterKey(
                f"previous key entry {index} is malformed: expected '<version>:<base64 key>'"
            )
        if version in result:
            raise InvalidMasterKey(f"previous key version '{version}' is given more than once")
        result[version] = key
    return result


@dataclass(frozen=True, slots=True, repr=False)
class KeySet:
    """The keys derived from one master key version (``audit_signing``: an Ed25519 seed)."""

    version: str
    credentials: bytes
    internal_hmac: bytes
    external_hmac: bytes
    storage: bytes
    audit_signing: bytes

    @classmethod
    def from_master(cls, master: bytes, version: str) -> KeySet:
        if len(master) < MIN_MASTER_KEY_LENGTH:
            raise InvalidMasterKey(
                f"master key too short: got {len(master)} bytes, "
                f"minimum {MIN_MASTER_KEY_LENGTH} required"
            )
        return cls(
            version=version,
            credentials=derive(master, CREDENTIALS_INFO),
            internal_hmac=derive(master, INTERNAL_HMAC_INFO),
            external_hmac=derive(master, EXTERNAL_HMAC_INFO),
            storage=derive(master, STORAGE_ENCRYPTION_INFO),
            audit_signing=derive(master, AUDIT_SIGNING_INFO),
        )

    def __repr__(self) -> str:
        return f"KeySet(version={self.version!r})"


class KeyRing:
    """Key sets by version: ``current`` encrypts and signs; every version decrypts and verifies.

    ``master_key`` is the base64 text of ``APP_ENC_KEY``, ``version`` its ``APP_ENC_KEY_VERSION``
    (``"1"`` when empty) and ``previous`` the older keys, as ``APP_ENC_KEYS_PREVIOUS`` text or a
    ``{version: base64}`` mapping. Raises ``InvalidMasterKey`` for any unusable key.
    """

    __slots__ = ("_current", "_sets")

    def __init__(
        self,
        master_key: str,
        version: str = DEFAULT_KEY_VERSION,
        previous: str | Mapping[str, str] | None = None,
    ) -> None:
        version = version.strip() or DEFAULT_KEY_VERSION
        if not master_key.strip():
            raise InvalidMasterKey("master key is empty")
        self._current = KeySet.from_master(decode_master_key(master_key), version)
        self._sets: dict[str, KeySet] = {version: self._current}
        if previous is None or isinstance(previous, str):
            older = parse_previous_keys(previous)
        else:
            older = dict(previous)
        for old_version, text in older.items():
            old_version = old_version.strip()
            if not old_version:
                raise InvalidMasterKey("a previous key has an empty version")
            if old_version in self._sets:
                raise InvalidMasterKey(f"previous key version '{old_version}' is configured twice")
            try:
                master = decode_master_key(text)
            except InvalidMasterKey as e:
                raise InvalidMasterKey(f"previous key version '{old_version}': {e}") from None
            self._sets[old_version] = KeySet.from_master(master, old_version)

    @property
    def current(self) -> KeySet:
        return self._current

    def versions(self) -> tuple[str, ...]:
        """Configured versions, the current one first."""
        return tuple(self._sets)

    def get(self, version: str) -> KeySet | None:
        return self._sets.get(version)

    def __contains__(self, version: object) -> bool:
        return version in self._sets

    def __iter__(self) -> Iterator[KeySet]:
        return iter(self._sets.values())

    def __len__(self) -> int:
        return len(self._sets)

    def __repr__(self) -> str:
        return f"KeyRing(current={self._current.version!r}, versions={list(self._sets)!r})"
