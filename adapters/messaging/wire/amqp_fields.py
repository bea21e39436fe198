"""AMQP field types of header values, written as the Go reference's client writes them.

Go's amqp091 client sends ``[]byte`` as a byte array (field type ``x``), ``string`` as a long
string (``S``) and ``int`` as a long-int (``I``, signed 32-bit). pamqp, under aio-pika, sends
``bytearray`` as ``x`` and ``str`` as ``S``, refuses ``bytes``, and gives an ``int`` the
smallest type that holds it (0 becomes a short-short-int ``b``). :func:`amqp_headers` maps
header values so that pamqp writes the reference's types: ``bytes`` to ``bytearray`` and an
``int`` to :class:`LongInt`, which :func:`install` teaches pamqp to write as ``I``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pamqp import encode

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_MARK = "_writes_long_int"


class LongInt(int):
    """An integer written as an AMQP long-int (field type ``I``)."""


def install() -> None:
    """Teach pamqp's field-table encoder to write :class:`LongInt` as ``I``. Idempotent; every
    other value is encoded exactly as before."""
    current: Callable[[Any], bytes] = encode.encode_table_value
    if getattr(current, _MARK, False):
        return

    def encode_table_value(value: Any) -> bytes:
        if type(value) is LongInt:
            return b"I" + encode.long_int(value)
        return current(value)

    setattr(encode_table_value, _MARK, True)
    encode.encode_table_value = encode_table_value


def amqp_headers(headers: Mapping[str, object]) -> dict[str, Any]:
    """Header values as pamqp must get them to write the reference's field types: ``bytes``
    as a byte array, ``str`` as a long string, an ``int`` (not a bool) as a long-int."""
    install()
    return {name: _field(value) for name, value in headers.items()}


def _field(value: object) -> object:
    if isinstance(value, bytes):
        return bytearray(value)
    if isinstance(value, int) and not isinstance(value, bool) and _INT32_MIN <= value <= _INT32_MAX:
        return LongInt(value)
    return value
