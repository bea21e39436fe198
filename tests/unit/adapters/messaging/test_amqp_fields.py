"""Header values reach the wire with the AMQP field types of the Go reference (§4.8, §5.2)."""

from __future__ import annotations

import struct

from pamqp import decode, encode

from adapters.messaging.wire.amqp_fields import LongInt, amqp_headers


def _types(table: bytes) -> dict[str, str]:
    """The field type letter of each entry of an encoded field table."""
    (size,) = struct.unpack(">I", table[:4])
    data, offset, kinds = table[4 : 4 + size], 0, {}
    while offset < len(data):
        length = data[offset]
        name = data[offset + 1 : offset + 1 + length].decode()
        offset += 1 + length
        kinds[name] = chr(data[offset])
        consumed, _ = decode.embedded_value(data[offset:])
        offset += consumed
    return kinds


def test_bytes_go_out_as_byte_arrays_text_as_long_strings_and_ints_as_long_ints() -> None:
    headers = amqp_headers({"ce-id": b"fetcher.job.completed.x", "t": "1780000000", "retry": 0})

    assert _types(encode.field_table(headers)) == {"ce-id": "x", "t": "S", "retry": "I"}
    assert type(headers["retry"]) is LongInt


def test_the_encoded_table_decodes_to_the_same_values() -> None:
    encoded = encode.field_table(amqp_headers({"a": b"\xc3\xa9t\xc3\xa9", "b": "v1", "c": -5}))

    _, decoded = decode.field_table(encoded)

    assert decoded == {"a": bytearray("été".encode()), "b": "v1", "c": -5}


def test_other_values_keep_pamqp_encoding() -> None:
    before = encode.field_table({"flag": True, "big": 2**40, "none": None})

    headers = amqp_headers({"flag": True, "big": 2**40, "none": None})

    assert encode.field_table(headers) == before
    assert _types(before) == {"flag": "t", "big": "l", "none": "V"}
