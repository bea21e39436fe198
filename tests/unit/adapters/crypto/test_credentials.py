import base64

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.crypto.credentials import AesGcmCredentialCipher, CredentialDecryptionFailed
from adapters.crypto.keys import KeyRing, derive
from application.errors import CredentialKeyMissing, PortError
from application.ports.credential_cipher import CredentialCipher
from domain.connection import SealedSecret

MASTER = bytes(range(32))
MASTER_B64 = base64.b64encode(MASTER).decode()
NEW_MASTER = bytes(range(50, 90))
NEW_MASTER_B64 = base64.b64encode(NEW_MASTER).decode()
CREDENTIALS_KEY = derive(MASTER, "fetcher-credentials-v1")


@pytest.fixture
def cipher() -> AesGcmCredentialCipher:
    return AesGcmCredentialCipher(KeyRing(MASTER_B64))


def test_is_a_credential_cipher(cipher):
    assert CredentialCipher in type(cipher).__mro__
    assert cipher.current_version == "1"


def test_seal_stores_base64_of_nonce_ciphertext_tag_under_the_current_version(cipher):
    sealed = cipher.seal("s3cr3t-pässword")
    assert sealed.key_version == "1"
    raw = base64.b64decode(sealed.ciphertext, validate=True)
    plaintext = "s3cr3t-pässword".encode()
    assert len(raw) == 12 + len(plaintext) + 16
    assert AESGCM(CREDENTIALS_KEY).decrypt(raw[:12], raw[12:], None) == plaintext
    assert "s3cr3t" not in repr(sealed)


def test_opens_a_value_sealed_the_reference_way(cipher):
    nonce = bytes.fromhex("00112233445566778899aabb")
    blob = base64.b64encode(nonce + AESGCM(CREDENTIALS_KEY).encrypt(nonce, b"hunter2", None))
    assert blob.startswith(b"ABEiM0RVZneImaq7")
    assert cipher.open(SealedSecret(ciphertext=blob.decode(), key_version="1")) == "hunter2"


def test_each_seal_uses_a_fresh_nonce(cipher):
    first, second = cipher.seal("same"), cipher.seal("same")
    assert first.ciphertext != second.ciphertext
    assert cipher.open(first) == cipher.open(second) == "same"


def test_round_trips_empty_and_unicode_text(cipher):
    for text in ["", "pa:ss,word", "🔑 ключ\n"]:
        assert cipher.open(cipher.seal(text)) == text


def test_unknown_key_version_raises_credential_key_missing(cipher):
    sealed = cipher.seal("secret")
    with pytest.raises(CredentialKeyMissing) as raised:
        cipher.open(SealedSecret(ciphertext=sealed.ciphertext, key_version="2"))
    assert raised.value.version == "2"
    assert "'2'" in str(raised.value)


def test_tampered_ciphertext_is_refused_with_a_safe_message(cipher):
    raw = bytearray(base64.b64decode(cipher.seal("top-secret").ciphertext))
    raw[14] ^= 0x01
    tampered = SealedSecret(ciphertext=base64.b64encode(bytes(raw)).decode(), key_version="1")
    with pytest.raises(CredentialDecryptionFailed) as raised:
        cipher.open(tampered)
    assert isinstance(raised.value, PortError)
    assert "top-secret" not in str(raised.value)
    assert str(raised.value) == "stored credential could not be decrypted: authentication failed"


@pytest.mark.parametrize("ciphertext", ["not base64!", base64.b64encode(bytes(27)).decode()])
def test_malformed_ciphertext_is_refused(cipher, ciphertext):
    with pytest.raises(CredentialDecryptionFailed):
        cipher.open(SealedSecret(ciphertext=ciphertext, key_version="1"))


def test_wrong_key_for_the_version_is_refused(cipher):
    other = AesGcmCredentialCipher(KeyRing(NEW_MASTER_B64))
    with pytest.raises(CredentialDecryptionFailed):
        other.open(cipher.seal("secret"))


def test_rotation_opens_old_versions_and_seals_with_the_newest(cipher):
    old_secret = cipher.seal("old-password")
    rotated = AesGcmCredentialCipher(KeyRing(NEW_MASTER_B64, "2", f"1:{MASTER_B64}"))
    assert rotated.current_version == "2"
    assert rotated.open(old_secret) == "old-password"
    new_secret = rotated.seal("new-password")
    assert new_secret.key_version == "2"
    raw = base64.b64decode(new_secret.ciphertext)
    new_key = derive(NEW_MASTER, "fetcher-credentials-v1")
    assert AESGCM(new_key).decrypt(raw[:12], raw[12:], None) == b"new-password"
    with pytest.raises(CredentialKeyMissing):
        cipher.open(new_secret)
