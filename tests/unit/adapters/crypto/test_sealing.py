import base64
import hashlib
import hmac
import itertools
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.crypto.keys import KeyRing, derive
from adapters.crypto.sealing import (
    AesGcmResultSealer,
    ResultDecryptionFailed,
    ResultHmacMismatch,
    open_result,
)
from application.errors import PortError
from application.ports.result_sealer import ResultSealer, SealingStream

STORAGE_KEY = bytes(range(32))
HMAC_KEY = bytes(range(100, 132))
NONCE = bytes.fromhex("0f1e2d3c4b5a69788796a5b4")


def fixed_sealer() -> AesGcmResultSealer:
    return AesGcmResultSealer(STORAGE_KEY, HMAC_KEY, nonce_source=lambda size: NONCE[:size])


def one_shot(plaintext: bytes, key: bytes = STORAGE_KEY, nonce: bytes = NONCE) -> bytes:
    return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, plaintext, None))


def seal(chunks: list[bytes], sealer: AesGcmResultSealer | None = None):
    stream = (sealer or fixed_sealer()).start()
    pieces = [stream.update(chunk) for chunk in chunks]
    pieces.append(stream.finish())
    return stream, pieces


def test_types_implement_the_ports():
    assert ResultSealer in AesGcmResultSealer.__mro__
    assert SealingStream in type(fixed_sealer().start()).__mro__


@settings(max_examples=200, deadline=None)
@given(
    plaintext=st.binary(max_size=700),
    cuts=st.lists(st.integers(min_value=0, max_value=700), max_size=12),
)
def test_streamed_output_equals_one_shot_for_any_chunking(plaintext, cuts):
    bounds = sorted({min(cut, len(plaintext)) for cut in cuts})
    edges = [0, *bounds, len(plaintext)]
    chunks = [plaintext[a:b] for a, b in itertools.pairwise(edges)]
    stream, pieces = seal(chunks)
    assert b"".join(pieces) == one_shot(plaintext)
    assert stream.hmac_hex == hmac.new(HMAC_KEY, plaintext, hashlib.sha256).hexdigest()
    assert stream.plaintext_size == len(plaintext)
    for piece in pieces[:-1]:
        assert len(piece) % 4 == 0
        assert b"=" not in piece


def test_large_result_in_mib_chunks_equals_one_shot():
    plaintext = os.urandom(3 * 1024 * 1024 + 7)
    step = 1024 * 1024 + 1
    stream, pieces = seal([plaintext[i : i + step] for i in range(0, len(plaintext), step)])
    assert b"".join(pieces) == one_shot(plaintext)
    assert stream.hmac_hex == hmac.new(HMAC_KEY, plaintext, hashlib.sha256).hexdigest()


def test_byte_at_a_time_equals_one_shot():
    plaintext = bytes(range(256)) * 3
    stream, pieces = seal([plaintext[i : i + 1] for i in range(len(plaintext))])
    assert b"".join(pieces) == one_shot(plaintext)
    assert stream.plaintext_size == len(plaintext)


def test_memoryview_and_bytearray_chunks_are_accepted():
    data = b"0123456789" * 10
    stream, pieces = seal([memoryview(data)[:33], bytearray(data[33:])])  # type: ignore[list-item]
    assert b"".join(pieces) == one_shot(data)
    assert stream.plaintext_size == 100


def test_empty_result_is_nonce_and_tag():
    stream, pieces = seal([])
    blob = b"".join(pieces)
    assert blob == one_shot(b"")
    assert len(base64.b64decode(blob)) == 12 + 16
    assert stream.hmac_hex == hmac.new(HMAC_KEY, b"", hashlib.sha256).hexdigest()
    assert stream.plaintext_size == 0


def test_empty_updates_emit_nothing():
    stream = fixed_sealer().start()
    assert stream.update(b"") == b""
    assert stream.update(b"a") == base64.b64encode(NONCE)  # 12 nonce bytes + 1 carried byte
    assert stream.update(b"") == b""


def test_hmac_is_known_only_after_finish_and_the_stream_closes():
    stream = fixed_sealer().start()
    stream.update(b"data")
    with pytest.raises(RuntimeError):
        _ = stream.hmac_hex
    stream.finish()
    with pytest.raises(RuntimeError):
        stream.update(b"more")
    with pytest.raises(RuntimeError):
        stream.finish()


def test_every_stream_gets_a_fresh_random_nonce():
    sealer = AesGcmResultSealer(STORAGE_KEY, HMAC_KEY)
    first = b"".join(seal([b"same"], sealer)[1])
    second = b"".join(seal([b"same"], sealer)[1])
    assert first != second
    assert base64.b64decode(first)[:12] != base64.b64decode(second)[:12]


def test_from_ring_uses_the_current_storage_and_external_hmac_keys():
    master = bytes(range(32))
    ring = KeyRing(base64.b64encode(master).decode())
    stream, pieces = seal([b'{"rows":[1,2]}'], AesGcmResultSealer.from_ring(ring))
    blob = base64.b64decode(b"".join(pieces))
    storage = derive(master, "fetcher-storage-encryption-v1")
    assert AESGCM(storage).decrypt(blob[:12], blob[12:], None) == b'{"rows":[1,2]}'
    external = derive(master, "fetcher-external-hmac-v1")
    assert stream.hmac_hex == hmac.new(external, b'{"rows":[1,2]}', hashlib.sha256).hexdigest()


def test_sealer_rejects_bad_keys():
    with pytest.raises(ValueError):
        AesGcmResultSealer(bytes(16), HMAC_KEY)
    with pytest.raises(ValueError):
        AesGcmResultSealer(STORAGE_KEY, b"")
    assert STORAGE_KEY.hex() not in repr(fixed_sealer())


def sealed_blob(plaintext: bytes) -> tuple[bytes, str]:
    stream, pieces = seal([plaintext])
    return b"".join(pieces), stream.hmac_hex


def test_open_result_round_trips_and_checks_the_hmac():
    plaintext = b'[{"id":1,"email":"a@b.c"}]'
    blob, digest = sealed_blob(plaintext)
    assert open_result(blob, STORAGE_KEY, HMAC_KEY, digest) == plaintext
    assert open_result(blob + b"\n", STORAGE_KEY, HMAC_KEY, digest.upper()) == plaintext
    assert open_result(blob, STORAGE_KEY, None, None) == plaintext


def test_open_result_detects_a_tampered_blob():
    blob, digest = sealed_blob(b"x" * 64)
    raw = bytearray(base64.b64decode(blob))
    raw[20] ^= 0x80
    with pytest.raises(ResultDecryptionFailed) as raised:
        open_result(base64.b64encode(bytes(raw)), STORAGE_KEY, HMAC_KEY, digest)
    assert isinstance(raised.value, PortError)
    assert "authentication failed" in str(raised.value)


def test_open_result_detects_a_wrong_storage_key():
    blob, digest = sealed_blob(b"payload")
    with pytest.raises(ResultDecryptionFailed):
        open_result(blob, bytes(32), HMAC_KEY, digest)


def test_open_result_detects_an_hmac_mismatch():
    blob, _ = sealed_blob(b"payload")
    other = hmac.new(HMAC_KEY, b"payload!", hashlib.sha256).hexdigest()
    with pytest.raises(ResultHmacMismatch, match="HMAC mismatch"):
        open_result(blob, STORAGE_KEY, HMAC_KEY, other)
    right = hmac.new(HMAC_KEY, b"payload", hashlib.sha256).hexdigest()
    with pytest.raises(ResultHmacMismatch):
        open_result(blob, STORAGE_KEY, bytes(32), right)
    with pytest.raises(ResultHmacMismatch, match="64 hexadecimal"):
        open_result(blob, STORAGE_KEY, HMAC_KEY, "not-hex")


@pytest.mark.parametrize("blob", [b"not base64!", b"QUJD", base64.b64encode(bytes(27))])
def test_open_result_rejects_malformed_blobs(blob):
    with pytest.raises(ResultDecryptionFailed):
        open_result(blob, STORAGE_KEY, HMAC_KEY, None)


def test_the_tests_own_result_reader_opens_what_the_sealer_sealed_and_nothing_else():
    from cryptography.exceptions import InvalidTag

    from tests.support.results import open_sealed

    plaintext = b'{"pg":{"accounts":[{"id":1}]}}' * 1000
    stream, pieces = seal([plaintext[:7], plaintext[7:]], AesGcmResultSealer(STORAGE_KEY, HMAC_KEY))
    blob = b"".join(pieces)
    assert open_sealed(blob, STORAGE_KEY, HMAC_KEY, stream.hmac_hex) == plaintext
    with pytest.raises(ValueError, match="HMAC"):
        open_sealed(blob, STORAGE_KEY, HMAC_KEY, "0" * 64)
    with pytest.raises(InvalidTag):
        open_sealed(blob, bytes(32), HMAC_KEY, stream.hmac_hex)


@pytest.mark.parametrize(
    ("raw_size", "reason"),
    [(12 + 15, "too short to hold a nonce and a tag"), (12 + 16, "authentication failed")],
)
def test_a_blob_needs_a_nonce_and_a_whole_tag(raw_size, reason):
    """A blob of exactly nonce + tag is an (empty) ciphertext to authenticate; one byte less
    cannot be one."""
    with pytest.raises(ResultDecryptionFailed, match=reason):
        open_result(base64.b64encode(os.urandom(raw_size)), STORAGE_KEY, None, None)


@pytest.mark.parametrize("size", [31, 33])
def test_only_a_32_byte_storage_key_seals_or_opens(size):
    blob, _ = sealed_blob(b"payload")
    with pytest.raises(ValueError, match="32 bytes"):
        AesGcmResultSealer(bytes(size), HMAC_KEY)
    with pytest.raises(ValueError, match="32 bytes"):
        open_result(blob, bytes(size), None, None)


@pytest.mark.parametrize("size", [11, 13])
def test_a_stream_needs_a_12_byte_nonce(size):
    sealer = AesGcmResultSealer(STORAGE_KEY, HMAC_KEY, nonce_source=lambda _: bytes(size))
    with pytest.raises(ValueError, match="12 bytes"):
        sealer.start()


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_a_blob_wrapped_in_lines_opens(newline):
    blob, digest = sealed_blob(b"y" * 300)
    wrapped = newline.join(blob[i : i + 76] for i in range(0, len(blob), 76))
    assert open_result(wrapped, STORAGE_KEY, HMAC_KEY, digest) == b"y" * 300


def test_a_blob_with_a_character_outside_base64_is_not_base64():
    blob, _ = sealed_blob(b"payload")
    with pytest.raises(ResultDecryptionFailed, match="not valid base64"):
        open_result(blob[:8] + b"!" + blob[8:], STORAGE_KEY, None, None)
