import base64
import hashlib
import hmac

import pytest

from adapters.crypto.keys import (
    InvalidMasterKey,
    KeyRing,
    decode_master_key,
    derive,
    generate_master_key,
    parse_previous_keys,
)

MASTER = bytes(range(32))
MASTER_B64 = base64.b64encode(MASTER).decode()
OLD_MASTER = bytes(range(100, 140))
OLD_MASTER_B64 = base64.b64encode(OLD_MASTER).decode()
INFOS = {
    "credentials": "fetcher-credentials-v1",
    "internal_hmac": "fetcher-internal-hmac-v1",
    "external_hmac": "fetcher-external-hmac-v1",
    "storage": "fetcher-storage-encryption-v1",
}


def hkdf_by_hand(ikm: bytes, info: bytes, length: int = 32) -> bytes:
    """RFC 5869 with SHA-256 and no salt (a string of HashLen zero bytes)."""
    prk = hmac.new(b"\x00" * 32, ikm, hashlib.sha256).digest()
    okm, block, counter = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    return okm[:length]


def test_derive_matches_rfc5869_test_case_3_without_salt():
    ikm = bytes.fromhex("0b" * 22)
    okm = bytes.fromhex(
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    )
    assert derive(ikm, "") == okm[:32]
    assert hkdf_by_hand(ikm, b"", 42) == okm


@pytest.mark.parametrize("info", sorted(INFOS.values()))
def test_derive_matches_hand_computed_hkdf(info):
    assert derive(MASTER, info) == hkdf_by_hand(MASTER, info.encode())


def test_ring_exposes_the_four_derived_keys_of_the_current_version():
    ring = KeyRing(MASTER_B64, "7")
    assert ring.current.version == "7"
    for attribute, info in INFOS.items():
        assert getattr(ring.current, attribute) == hkdf_by_hand(MASTER, info.encode())
    keys = [getattr(ring.current, attribute) for attribute in INFOS]
    assert len(set(keys)) == 4
    assert MASTER not in keys


def test_ring_version_defaults_to_1():
    assert KeyRing(MASTER_B64).current.version == "1"
    assert KeyRing(MASTER_B64, "").current.version == "1"


def test_ring_accepts_longer_master_keys_and_surrounding_whitespace():
    long_key = bytes(range(64))
    ring = KeyRing("  " + base64.b64encode(long_key).decode() + "\n")
    assert ring.current.storage == hkdf_by_hand(long_key, b"fetcher-storage-encryption-v1")


def test_ring_holds_previous_versions_current_first():
    ring = KeyRing(MASTER_B64, "2", f"1:{OLD_MASTER_B64}, 0:{MASTER_B64}")
    assert ring.versions() == ("2", "1", "0")
    assert len(ring) == 3
    old = ring.get("1")
    assert old is not None
    assert old.version == "1"
    assert old.credentials == hkdf_by_hand(OLD_MASTER, b"fetcher-credentials-v1")
    assert old.external_hmac == hkdf_by_hand(OLD_MASTER, b"fetcher-external-hmac-v1")
    assert ring.get("9") is None
    assert "1" in ring
    assert "9" not in ring
    assert [keys.version for keys in ring] == ["2", "1", "0"]


def test_ring_accepts_previous_keys_as_a_mapping():
    ring = KeyRing(MASTER_B64, "2", {"1": OLD_MASTER_B64})
    assert ring.versions() == ("2", "1")


def test_key_material_never_appears_in_repr():
    ring = KeyRing(MASTER_B64, "2", f"1:{OLD_MASTER_B64}")
    texts = [repr(ring), str(ring), repr(ring.current), repr(ring.get("1"))]
    secrets = [MASTER_B64, OLD_MASTER_B64, MASTER.hex(), repr(MASTER)]
    for keys in ring:
        for attribute in INFOS:
            value = getattr(keys, attribute)
            secrets += [value.hex(), repr(value)]
    for text in texts:
        for secret in secrets:
            assert secret not in text
    assert repr(ring) == "KeyRing(current='2', versions=['2', '1'])"
    assert repr(ring.current) == "KeySet(version='2')"


def test_invalid_base64_is_rejected_without_quoting_the_key():
    secret_looking = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3Jl!A=="
    with pytest.raises(InvalidMasterKey) as raised:
        KeyRing(secret_looking)
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == "invalid master key (base64): illegal base64 data at input byte 44"
    assert "c2VjcmV0" not in str(raised.value)


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(bytes(32)).decode().rstrip("="),  # padding is required
        base64.urlsafe_b64encode(b"\xfb" * 33).decode(),  # URL-safe alphabet is not standard
        "AAAA=AAA" + base64.b64encode(bytes(32)).decode(),
    ],
)
def test_non_standard_base64_is_rejected(text):
    with pytest.raises(InvalidMasterKey, match=r"^invalid master key \(base64\): "):
        decode_master_key(text)


def test_short_master_key_is_rejected():
    with pytest.raises(InvalidMasterKey) as raised:
        KeyRing(base64.b64encode(bytes(16)).decode())
    assert str(raised.value) == "master key too short: got 16 bytes, minimum 32 required"


def test_empty_master_key_is_rejected():
    with pytest.raises(InvalidMasterKey, match="empty"):
        KeyRing("  ")


def test_parse_previous_keys():
    assert parse_previous_keys(None) == {}
    assert parse_previous_keys("") == {}
    assert parse_previous_keys(" 2:AAAA , ,1:BBBB=,") == {"2": "AAAA", "1": "BBBB="}
    assert list(parse_previous_keys("b:x,a:y")) == ["b", "a"]


@pytest.mark.parametrize("text", ["AAAA", ":AAAA", "1:", "1:AAAA,1:BBBB"])
def test_parse_previous_keys_rejects_malformed_entries(text):
    with pytest.raises(InvalidMasterKey):
        parse_previous_keys(text)


def test_previous_key_may_not_reuse_the_current_version():
    with pytest.raises(InvalidMasterKey, match="'1'"):
        KeyRing(MASTER_B64, "1", f"1:{OLD_MASTER_B64}")


def test_bad_previous_key_names_its_version_but_not_the_key():
    short = base64.b64encode(b"0123456789").decode()
    with pytest.raises(InvalidMasterKey) as raised:
        KeyRing(MASTER_B64, "2", f"1:{short}")
    assert str(raised.value) == (
        "previous key version '1': master key too short: got 10 bytes, minimum 32 required"
    )
    assert short not in str(raised.value)


def test_generate_master_key_is_random_32_bytes_and_usable():
    first, second = generate_master_key(), generate_master_key()
    assert first != second
    assert len(base64.b64decode(first, validate=True)) == 32
    assert KeyRing(first).current.version == "1"
