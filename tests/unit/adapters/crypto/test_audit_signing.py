"""The audit signing keys: decoding what an operator gives, key ids and fingerprints, checking
a signature (valid, altered, unknown key, not base64), and the configured key beside the
ring's."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from adapters.crypto.audit_signing import (
    AuditKeys,
    Ed25519CheckpointKeys,
    Ed25519CheckpointSigner,
    InvalidAuditKey,
    decode_private,
    decode_public,
    encode_public,
    fingerprint,
    key_id_of,
    public_bytes,
)
from adapters.crypto.keys import KeyRing
from application.ports.audit import SignatureCheck

SEED = bytes(range(32))
PRIVATE = Ed25519PrivateKey.from_private_bytes(SEED)
PUBLIC = PRIVATE.public_key()


def test_a_key_id_is_its_version_and_16_hex_of_the_public_keys_sha256():
    expected = hashlib.sha256(public_bytes(PUBLIC)).hexdigest()[:16]
    assert fingerprint(PUBLIC) == expected and len(expected) == 16
    assert key_id_of("3", PUBLIC) == f"3.{expected}"
    assert Ed25519CheckpointSigner(PRIVATE, "3").key_id == f"3.{expected}"


def test_keys_round_trip_through_base64():
    assert public_bytes(decode_public(encode_public(PUBLIC))) == public_bytes(PUBLIC)
    private = decode_private(base64.b64encode(SEED).decode() + "\n")
    assert public_bytes(private.public_key()) == public_bytes(PUBLIC)


@pytest.mark.parametrize("size", [31, 33])
def test_only_32_byte_keys_decode(size):
    text = base64.b64encode(bytes(size)).decode()
    with pytest.raises(InvalidAuditKey, match=f"{size} bytes, not 32"):
        decode_public(text)
    with pytest.raises(InvalidAuditKey, match=f"{size} bytes, not 32"):
        decode_private(text)


def test_a_key_that_is_not_base64_is_named_but_never_shown():
    with pytest.raises(InvalidAuditKey) as public:
        decode_public("not*base64")
    with pytest.raises(InvalidAuditKey) as private:
        decode_private("secret*seed")
    assert "not base64" in str(public.value) and "not*base64" not in str(public.value)
    assert "not base64" in str(private.value) and "secret" not in str(private.value)


def test_a_signature_is_valid_altered_unknown_or_not_base64():
    signer = Ed25519CheckpointSigner(PRIVATE, "1")
    keys = Ed25519CheckpointKeys([(signer.key_id, PUBLIC)])
    signature = signer.sign(b"message")
    assert keys.check(signer.key_id, b"message", signature) is SignatureCheck.VALID
    assert keys.check(signer.key_id, b"messagE", signature) is SignatureCheck.INVALID
    assert keys.check(signer.key_id, b"message", "not*base64") is SignatureCheck.INVALID
    assert keys.check("9.0000000000000000", b"message", signature) is SignatureCheck.UNKNOWN_KEY
    assert keys.key_ids() == (signer.key_id,)
    assert SEED.hex() not in repr(signer) and signer.key_id in repr(signer)


def test_public_keys_alone_match_any_version_by_fingerprint():
    keys = Ed25519CheckpointKeys.of_public([PUBLIC])
    signature = Ed25519CheckpointSigner(PRIVATE, "7").sign(b"m")
    assert keys.check(key_id_of("7", PUBLIC), b"m", signature) is SignatureCheck.VALID
    assert keys.check(key_id_of("1", PUBLIC), b"m", signature) is SignatureCheck.VALID


def test_a_configured_key_signs_and_every_ring_version_still_verifies():
    ring = KeyRing(base64.b64encode(bytes(range(40, 72))).decode())
    derived = AuditKeys.from_ring(ring)
    configured = AuditKeys.from_ring(ring, base64.b64encode(SEED).decode())
    assert configured.signer.key_id == key_id_of("configured", PUBLIC)
    assert set(configured.publics) == {configured.signer.key_id, derived.signer.key_id}
    assert derived.signer.key_id.startswith(f"{ring.current.version}.")
    old = derived.signer.sign(b"m")
    assert configured.keys.check(derived.signer.key_id, b"m", old) is SignatureCheck.VALID


def test_a_key_with_a_character_outside_base64_is_refused_not_skipped():
    """Lenient base64 would drop the stray character and decode a key anyway."""
    public, private = encode_public(PUBLIC), base64.b64encode(SEED).decode()
    with pytest.raises(InvalidAuditKey, match="not base64"):
        decode_public(public[:10] + "!" + public[10:])
    with pytest.raises(InvalidAuditKey, match="not base64"):
        decode_private(private[:10] + "!" + private[10:])


def test_a_signature_with_a_stray_character_is_invalid():
    signer = Ed25519CheckpointSigner(PRIVATE, "1")
    keys = Ed25519CheckpointKeys([(signer.key_id, PUBLIC)])
    signature = signer.sign(b"m")
    stray = signature[:10] + "!" + signature[10:]
    assert keys.check(signer.key_id, b"m", stray) is SignatureCheck.INVALID
