"""Reading the AMQP field types of delivered headers straight from the raw frames.

A decoded header table has lost its field types (a byte array and a long string both become
text, every integer type becomes ``int``). :func:`raw_header_tables` records the payload of each
content header frame this process receives and reads the type letter of every header entry
from those bytes, so a test can pin what went over the wire.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pamqp.frame
from pamqp import decode

_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS = 0x8000, 0x4000, 0x2000

SIGNATURE_TYPES = {"x-message-signature": "S", "t": "S", "signature-version": "S"}
WORK_MESSAGE_TYPES = {"jobId": "S", "X-Request-Id": "S", "x-retry-count": "I", **SIGNATURE_TYPES}
"""Reference §4.8, single-tenant: no ``X-Tenant-ID``; ``x-retry-count`` is a Go ``int``."""
CE_ATTRIBUTES = (
    "specversion", "id", "source", "type", "time", "subject", "datacontenttype",
    "schemaversion", "resourcetype", "eventtype", "tenantid",
)  # fmt: skip
EVENT_TYPES = {
    **{f"ce-{name}": "x" for name in CE_ATTRIBUTES},
    "X-Tenant-ID": "S",
    "X-Request-Id": "S",
    "x-retry-count": "I",
    **SIGNATURE_TYPES,
}
"""Reference §5.2: ``ce-*`` byte arrays, the envelope's headers strings (``t`` a decimal
string), ``x-retry-count`` a long-int."""


@dataclass(frozen=True, slots=True)
class Field:
    type: str
    """The AMQP field type letter (``x`` byte array, ``S`` long string, ``I`` long-int...)."""
    value: object


def header_fields(frame_payload: bytes) -> dict[str, Field]:
    """The headers table of a basic content header frame payload, entry by entry."""
    offset = 2 + 2 + 8  # class id, weight, body size
    (flags,) = struct.unpack_from(">H", frame_payload, offset)
    offset += 2
    for flag in (_CONTENT_TYPE, _CONTENT_ENCODING):
        if flags & flag:
            offset += 1 + frame_payload[offset]
    if not flags & _HEADERS:
        return {}
    (size,) = struct.unpack_from(">I", frame_payload, offset)
    table = frame_payload[offset + 4 : offset + 4 + size]
    fields: dict[str, Field] = {}
    position = 0
    while position < len(table):
        length = table[position]
        name = table[position + 1 : position + 1 + length].decode("utf-8")
        position += 1 + length
        kind = chr(table[position])
        consumed, value = decode.embedded_value(table[position:])
        fields[name] = Field(kind, value)
        position += consumed
    return fields


@contextlib.contextmanager
def raw_header_tables() -> Iterator[list[dict[str, Field]]]:
    """Collects the header fields of every message this process receives meanwhile."""
    seen: list[dict[str, Field]] = []
    original = pamqp.frame._unmarshal_header_frame

    def recording(frame_data: bytes):  # type: ignore[no-untyped-def]
        seen.append(header_fields(bytes(frame_data)))
        return original(frame_data)

    pamqp.frame._unmarshal_header_frame = recording  # type: ignore[assignment]
    try:
        yield seen
    finally:
        pamqp.frame._unmarshal_header_frame = original  # type: ignore[assignment]


def field_types(seen: list[dict[str, Field]], header: str, value: str) -> dict[str, str]:
    """The field type of each header of the one message whose ``header`` reads ``value``."""
    matching = [
        fields for fields in seen if header in fields and _text(fields[header].value) == value
    ]
    assert len(matching) == 1, f"{len(matching)} messages with {header}={value!r}"
    return {name: field.type for name, field in matching[0].items()}


def _text(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")
    return str(value)
