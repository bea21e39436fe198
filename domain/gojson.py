"""JSON encoding with the byte rules of Go's ``encoding/json``.

The request hash and signed payloads must be byte-identical to the reference service's, so the
encoder reproduces Go's rules: sorted map keys, ``<>&`` and U+2028/U+2029 escaped, numbers as
float64 in the shortest round-trip form (ECMAScript style exponents).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_ESCAPE_TABLE = {ord(ch): escaped for ch, escaped in _ESCAPES.items()}
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_string(value: str) -> str:
    """A JSON string as Go writes it: lone surrogates become U+FFFD, ``<>&`` and U+2028/U+2029
    are escaped; the rest as the stdlib's C encoder writes it without ASCII escaping."""
    ascii_only = value.isascii()
    if not ascii_only and _SURROGATE.search(value):
        value = _SURROGATE.sub("\ufffd", value)
    text: str = encode_basestring(value)
    if "<" in text or ">" in text or "&" in text or not ascii_only:
        text = text.translate(_ESCAPE_TABLE)
    return text


def encode_float(value: float) -> str:
    """Go's float64 formatting (``strconv.FormatFloat(f, 'f'|'e', -1, 64)`` as json uses it)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"unsupported value: {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    sign = ""
    if mantissa.startswith("-"):
        sign, mantissa = "-", mantissa[1:]
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # decimal exponent such that value = 0.d1d2d3... * 10**point
    point = len(int_part) + (int(exponent) if exponent else 0)
    if int_part == "0":
        stripped = frac_part.lstrip("0")
        point = -(len(frac_part) - len(stripped)) + (int(exponent) if exponent else 0)
        digits = stripped
    digits = digits.rstrip("0") or "0"
    absolute = abs(value)
    if absolute < 1e-6 or absolute >= 1e21:
        exp = point - 1
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'+' if exp >= 0 else '-'}{abs(exp)}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def encode(value: Any) -> str:
    """Compact Go JSON. Mappings have sorted keys; ints are treated as float64 like Go's decoder."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, int):
        return encode_float(float(value))
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8", "surrogatepass"))
        return "{" + ",".join(f"{encode_string(k)}:{encode(v)}" for k, v in items) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(encode(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode_ordered(pairs: Sequence[tuple[str, Any]]) -> str:
    """A Go struct: fields in declaration order (values already encoded by the caller)."""
    return "{" + ",".join(f"{encode_string(k)}:{v}" for k, v in pairs) + "}"
