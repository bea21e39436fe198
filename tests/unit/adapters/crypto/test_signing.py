import base64
import hashlib
import hmac

import pytest

from adapters.crypto.keys import KeyRing
from adapters.crypto.signing import HmacMessageSigner, body_job_id, signature_payload
from application.errors import InvalidSignature
from application.ports.signer import MessageSigner

KEY = bytes(range(32))
OLD_KEY = bytes(range(32, 64))
NOW = 1_752_400_000
EXCHANGE = "fetcher.job.events"
ROUTING_KEY = "job.completed"
TENANT = "single-tenant"
BODY = (
    b'{"jobId":"0190b8a0-0000-7000-8000-000000000001","metadata":{"error":{"message":"boom"},'
    b'"source":"payments"},"status":"failed"}'
)
JOB_ID = "0190b8a0-0000-7000-8000-000000000001"


def signed_headers(signer=None, *, timestamp=NOW, tenant=TENANT, body=BODY) -> dict[str, object]:
    signer = signer or HmacMessageSigner([KEY])
    headers: dict[str, object] = dict(
        signer.sign(
            tenant=tenant,
            exchange=EXCHANGE,
            routing_key=ROUTING_KEY,
            body=body,
            timestamp=timestamp,
        )
    )
    if tenant:
        headers["X-Tenant-ID"] = tenant
    return headers


def verify(
    signer, headers, *, exchange=EXCHANGE, routing_key=ROUTING_KEY, body=BODY, now=NOW, max_age=None
):
    signer.verify(
        headers=headers,
        exchange=exchange,
        routing_key=routing_key,
        body=body,
        now=now,
        max_age=max_age,
    )


def test_signature_payload_is_the_six_line_envelope():
    payload = signature_payload(
        timestamp=NOW,
        tenant=TENANT,
        job_id=JOB_ID,
        exchange=EXCHANGE,
        routing_key=ROUTING_KEY,
        body=BODY,
    )
    assert payload == (
        b"1752400000\nv1\nsingle-tenant\n0190b8a0-0000-7000-8000-000000000001\n"
        b"fetcher.job.events\njob.completed\n" + BODY
    )


def test_signature_payload_keeps_empty_lines_for_job_messages():
    payload = signature_payload(
        timestamp=5, tenant="", job_id="", exchange="", routing_key="fetcher.jobs", body=b"x"
    )
    assert payload == b"5\nv1\n\n\n\nfetcher.jobs\nx"


def test_sign_returns_the_three_headers_over_the_envelope():
    headers = HmacMessageSigner([KEY]).sign(
        tenant=TENANT, exchange=EXCHANGE, routing_key=ROUTING_KEY, body=BODY, timestamp=NOW
    )
    expected_payload = f"{NOW}\nv1\n{TENANT}\n{JOB_ID}\n{EXCHANGE}\n{ROUTING_KEY}\n".encode() + BODY
    assert headers == {
        "x-message-signature": hmac.new(KEY, expected_payload, hashlib.sha256).hexdigest(),
        "t": "1752400000",
        "signature-version": "v1",
    }
    assert headers["x-message-signature"] == headers["x-message-signature"].lower()


@pytest.mark.parametrize(
    ("body", "job_id"),
    [
        (b'{"jobId":"abc","x":1}', "abc"),
        (b'  {"x":{"jobId":"nested"},"jobId":"top"} ', "top"),
        (b'{"jobId":123}', ""),
        (b'{"jobId":null}', ""),
        (b'["jobId","abc"]', ""),
        (b"not json", ""),
        (b'{"jobId":"abc"', ""),
        (b'{"jobId":"abc","n":NaN}', ""),
        (b'{"jobId":"abc","n":1e400}', ""),
        (b"", ""),
        ('{"jobId":"caf\u00e9"}'.encode(), "caf\u00e9"),
    ],
)
def test_job_id_is_the_top_level_string_of_a_json_object(body, job_id):
    assert body_job_id(body) == job_id


def test_non_ascii_job_id_is_signed_as_utf8():
    body = '{"jobId":"ação"}'.encode()
    payload = signature_payload(
        timestamp=1, tenant="t", job_id=body_job_id(body), exchange="e", routing_key="r", body=body
    )
    assert payload.startswith("1\nv1\nt\nação\ne\nr\n".encode())


def test_is_a_message_signer():
    assert MessageSigner in HmacMessageSigner.__mro__


def test_verify_accepts_its_own_signature():
    signer = HmacMessageSigner([KEY])
    verify(signer, signed_headers(signer))


def test_verify_accepts_amqp_byte_array_headers_and_integer_timestamp():
    signer = HmacMessageSigner([KEY])
    headers = {
        name: value.encode() if isinstance(value, str) else value
        for name, value in signed_headers(signer).items()
    }
    assert all(isinstance(value, bytes) for value in headers.values())
    verify(signer, headers)
    verify(signer, {**headers, "t": NOW})
    verify(signer, {**headers, "t": bytearray(b"1752400000")})


def test_verify_without_tenant_header_uses_an_empty_tenant_line():
    signer = HmacMessageSigner([KEY])
    headers = signed_headers(signer, tenant="")
    assert "X-Tenant-ID" not in headers
    verify(signer, headers)
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(signer, {**headers, "X-Tenant-ID": "acme"})


@pytest.mark.parametrize(
    "change",
    [
        {"body": BODY.replace(b"boom", b"bam!")},
        {"body": BODY + b" "},
        {"exchange": "other.exchange"},
        {"exchange": ""},
        {"routing_key": "job.failed"},
    ],
)
def test_verify_rejects_a_changed_message(change):
    signer = HmacMessageSigner([KEY])
    with pytest.raises(InvalidSignature) as raised:
        verify(signer, signed_headers(signer), **change)
    assert str(raised.value) == "signature mismatch"


def test_verify_rejects_a_changed_tenant():
    signer = HmacMessageSigner([KEY])
    headers = signed_headers(signer)
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(signer, {**headers, "X-Tenant-ID": "other-tenant"})
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(signer, {k: v for k, v in headers.items() if k != "X-Tenant-ID"})


def test_verify_rejects_a_changed_timestamp_or_signature():
    signer = HmacMessageSigner([KEY])
    headers = signed_headers(signer)
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(signer, {**headers, "t": str(NOW - 1)})
    signature = str(headers["x-message-signature"])
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(signer, {**headers, "x-message-signature": signature.upper()})
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(signer, {**headers, "x-message-signature": signature[:-1]})


def test_verify_rejects_another_key():
    headers = signed_headers(HmacMessageSigner([KEY]))
    with pytest.raises(InvalidSignature, match="signature mismatch"):
        verify(HmacMessageSigner([OLD_KEY]), headers)


def test_verify_refuses_timestamps_more_than_30_seconds_ahead():
    signer = HmacMessageSigner([KEY])
    verify(signer, signed_headers(signer, timestamp=NOW + 30))
    with pytest.raises(InvalidSignature) as raised:
        verify(signer, signed_headers(signer, timestamp=NOW + 31))
    assert str(raised.value) == "signature timestamp is in the future"


def test_verify_refuses_stale_signatures_only_when_max_age_is_set():
    signer = HmacMessageSigner([KEY])
    old = signed_headers(signer, timestamp=NOW - 301)
    verify(signer, old, max_age=None)
    verify(signer, signed_headers(signer, timestamp=NOW - 300), max_age=300)
    with pytest.raises(InvalidSignature) as raised:
        verify(signer, old, max_age=300)
    assert str(raised.value) == "signature has expired"


@pytest.mark.parametrize(
    ("drop", "reason"),
    [
        ("x-message-signature", "missing signature header"),
        ("t", "missing timestamp header"),
        ("signature-version", "missing signature version header"),
    ],
)
def test_verify_requires_the_signature_headers(drop, reason):
    signer = HmacMessageSigner([KEY])
    headers = {k: v for k, v in signed_headers(signer).items() if k != drop}
    with pytest.raises(InvalidSignature) as raised:
        verify(signer, headers)
    assert str(raised.value) == reason


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("t", "soon", "invalid timestamp header"),
        ("t", "1752400000.0", "invalid timestamp header"),
        ("t", " 1752400000", "invalid timestamp header"),
        ("t", 1752400000.0, "invalid timestamp header"),
        ("t", True, "invalid timestamp header"),
        ("t", str(2**63), "invalid timestamp header"),
        ("t", None, "invalid timestamp header"),
        ("x-message-signature", 12, "invalid signature header"),
        ("x-message-signature", b"\xff\xfe", "invalid signature header"),
        ("signature-version", None, "invalid signature version header"),
        ("signature-version", "v2", "unsupported signature version"),
        ("signature-version", b"V1", "unsupported signature version"),
        ("X-Tenant-ID", 7, "invalid tenant header"),
    ],
)
def test_verify_rejects_invalid_headers(name, value, reason):
    signer = HmacMessageSigner([KEY])
    with pytest.raises(InvalidSignature) as raised:
        verify(signer, {**signed_headers(signer), name: value})
    assert str(raised.value) == reason


def test_a_ring_signs_with_the_newest_key_and_verifies_older_ones():
    old_signer = HmacMessageSigner([OLD_KEY])
    ring_signer = HmacMessageSigner([KEY, OLD_KEY])
    verify(ring_signer, signed_headers(old_signer))
    new_headers = signed_headers(ring_signer)
    verify(HmacMessageSigner([KEY]), new_headers)
    with pytest.raises(InvalidSignature):
        verify(old_signer, new_headers)


def test_from_ring_uses_the_internal_or_external_keys_of_every_version():
    master = base64.b64encode(bytes(range(32))).decode()
    old_master = base64.b64encode(bytes(range(1, 33))).decode()
    ring = KeyRing(master, "2", f"1:{old_master}")
    old_ring = KeyRing(old_master)
    external, internal = (
        HmacMessageSigner.from_ring(ring, "external"),
        HmacMessageSigner.from_ring(ring, "internal"),
    )
    headers = signed_headers(external)
    digest = hmac.new(
        ring.current.external_hmac,
        signature_payload(
            timestamp=NOW,
            tenant=TENANT,
            job_id=JOB_ID,
            exchange=EXCHANGE,
            routing_key=ROUTING_KEY,
            body=BODY,
        ),
        hashlib.sha256,
    ).hexdigest()
    assert headers["x-message-signature"] == digest
    with pytest.raises(InvalidSignature):
        verify(internal, headers)
    verify(external, signed_headers(HmacMessageSigner.from_ring(old_ring, "external")))
    verify(internal, signed_headers(HmacMessageSigner.from_ring(old_ring, "internal")))


def test_signer_needs_full_length_keys_and_hides_them():
    with pytest.raises(ValueError):
        HmacMessageSigner([])
    with pytest.raises(ValueError):
        HmacMessageSigner([b"short"])
    assert KEY.hex() not in repr(HmacMessageSigner([KEY]))


@pytest.mark.parametrize("timestamp", [2**63 - 1, -(2**63)])
def test_a_timestamp_at_either_end_of_int64_verifies(timestamp):
    signer = HmacMessageSigner([KEY])
    verify(signer, signed_headers(signer, timestamp=timestamp), now=timestamp)


@pytest.mark.parametrize("timestamp", [2**63, -(2**63) - 1])
def test_a_timestamp_past_int64_is_invalid(timestamp):
    """As Go parses it: a number that does not fit an int64 is no timestamp."""
    signer = HmacMessageSigner([KEY])
    with pytest.raises(InvalidSignature, match="invalid timestamp header"):
        verify(signer, signed_headers(signer, timestamp=timestamp), now=timestamp)


def test_a_key_longer_than_the_minimum_signs_and_verifies():
    signer = HmacMessageSigner([bytes(range(64)), KEY])
    verify(signer, signed_headers(signer))


def test_only_the_two_purposes_choose_keys():
    ring = KeyRing(base64.b64encode(bytes(range(32))).decode())
    with pytest.raises(ValueError, match="unknown signing purpose"):
        HmacMessageSigner.from_ring(ring, "other")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown signing purpose"):
        HmacMessageSigner.from_ring(ring, "zzz")  # type: ignore[arg-type]


@pytest.mark.parametrize("age", [0, -10, 299])
def test_a_signature_younger_than_max_age_verifies(age):
    signer = HmacMessageSigner([KEY])
    verify(signer, signed_headers(signer, timestamp=NOW - age), max_age=300)


def test_a_key_one_byte_short_of_32_is_refused():
    with pytest.raises(ValueError, match="at least 32 bytes"):
        HmacMessageSigner([bytes(31)])
    HmacMessageSigner([bytes(32)])


def test_text_that_is_no_unicode_is_signed_with_replacement_characters():
    """A lone surrogate (a header Go would have decoded as U+FFFD) is signed as U+FFFD."""
    payload = signature_payload(
        timestamp=NOW, tenant="t\ud800", job_id="", exchange="x", routing_key="k", body=b"{}"
    )
    assert payload == f"{NOW}\nv1\nt\ufffd\n\nx\nk\n{{}}".encode()


def test_a_purpose_sorting_before_external_is_no_purpose():
    ring = KeyRing(base64.b64encode(bytes(range(32))).decode())
    with pytest.raises(ValueError, match="unknown signing purpose"):
        HmacMessageSigner.from_ring(ring, "abc")  # type: ignore[arg-type]
