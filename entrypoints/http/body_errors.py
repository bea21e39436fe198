"""What a body that does not parse gets wrong, said so that the client can fix it.

The reference answers every such body with FET-0001 "unable to parse request body"; Fetcher
keeps the code and that prefix, and adds where and what: the JSON path and what was expected
there (from the validation Litestar reports), or the line and column of invalid JSON (from
the byte offset the decoder reports, counted on the body Litestar kept).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from litestar import Request
from litestar.utils.scope.state import ScopeState

_BYTE = re.compile(r"\s*\(byte (\d+)\)\s*$")
_EXPECTED = re.compile(r"^Expected `([^`]+)`, got `([^`]+)`")
_TYPES = {
    "int": "an integer",
    "float": "a number",
    "number": "a number",
    "str": "a string",
    "bool": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
_SENSITIVE = ("pass", "secret", "token", "key", "cert", "credential")
"""A value under a name like these is never repeated in an answer (it may be a secret)."""
MAX_SHOWN = 40
"""A value longer than this (as JSON) is named by its type only."""

PREFIX = "unable to parse request body"
NOT_JSON = f"{PREFIX}: the body must be JSON sent with the header Content-Type: application/json"


def _body_of(request: Request[Any, Any, Any]) -> bytes | None:
    """The raw body, when Litestar already read it for this request (it keeps it in the
    scope's state); never read again here."""
    body = ScopeState.from_scope(request.scope).body
    return body if isinstance(body, bytes) else None


def line_and_column(body: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of the byte at ``offset``."""
    offset = max(0, min(offset, len(body)))
    line_start = body.rfind(b"\n", 0, offset) + 1
    column = len(body[line_start:offset].decode("utf-8", errors="replace")) + 1
    return body.count(b"\n", 0, offset) + 1, column


def malformed_json(detail: str, body: bytes | None) -> str:
    """``detail`` is the decoder's ``JSON is malformed: <what> (byte N)``."""
    what = detail.removeprefix("JSON is malformed:").strip()
    match = _BYTE.search(what)
    if match is None:
        return f"{PREFIX}: invalid JSON: {what}" if what else PREFIX
    what = what[: match.start()]
    if body is None:
        return f"{PREFIX}: invalid JSON at byte {match.group(1)}: {what}"
    line, column = line_and_column(body, int(match.group(1)))
    return f"{PREFIX}: invalid JSON at line {line}, column {column}: {what}"


def _walk(document: Any, key: str) -> tuple[bool, Any]:
    """The value at ``key`` (``a.b[2].c``) in ``document``; ``(False, None)`` when the path
    has a wildcard (``[...]``) or leads nowhere."""
    value = document
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(value, list) or index >= len(value):
                return False, None
            value = value[index]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return False, None
    return True, value


def _shown(key: str, value: Any) -> str | None:
    if any(word in key.lower() for word in _SENSITIVE) or isinstance(value, dict | list):
        return None
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN else None


def port_shown(value: Any) -> str:
    """A port sent as something else than a JSON integer, as the client wrote it (a port is
    never a secret), or its type when it is a structure."""
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, list):
        return _TYPES["array"]
    if isinstance(value, dict):
        return _TYPES["object"]
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN else _TYPES["str"]


def _problem(key: str, message: str, document: Any) -> str:
    match = _EXPECTED.match(message)
    if match is None:
        return message[:1].lower() + message[1:].replace("`", "")
    expected = " or ".join(_TYPES.get(each, each) for each in match.group(1).split(" | "))
    got = _TYPES.get(match.group(2), match.group(2))
    if "[...]" not in key:
        found, value = _walk(document, key)
        shown = _shown(key, value) if found else None
        if shown is not None:
            got = shown
    return f"expected {expected}, got {got}"


def invalid_fields(extra: Iterable[Mapping[str, Any]] | None, body: bytes | None) -> dict[str, str]:
    """``{json path: what is wrong there}`` from Litestar's validation details."""
    document: Any = None
    if body:
        try:
            document = json.loads(body)
        except ValueError:
            document = None
    fields: dict[str, str] = {}
    for item in extra or ():
        if not isinstance(item, Mapping) or item.get("source") not in (None, "body"):
            continue
        key = str(item.get("key") or "body")
        fields[key] = _problem(key, str(item.get("message", "")), document)
    return fields


def describe_invalid(
    request: Request[Any, Any, Any], extra: Any
) -> tuple[str, dict[str, str] | None]:
    """The message and ``fields`` of a body that decoded but does not fit the schema."""
    items = extra if isinstance(extra, list) else [extra] if isinstance(extra, dict) else []
    fields = invalid_fields(items, _body_of(request))
    if not fields:
        return PREFIX, None
    said = "; ".join(f"{key}: {problem}" for key, problem in fields.items())
    return f"{PREFIX}: {said}", fields


def describe_unparsable(request: Request[Any, Any, Any], detail: str) -> str:
    """The message of a body that could not be decoded at all."""
    if detail.startswith("JSON is malformed"):
        return malformed_json(detail, _body_of(request))
    if detail.startswith("Input data was truncated"):
        body = _body_of(request)
        if body is None:
            return f"{PREFIX}: invalid JSON: the body ends before the JSON is complete"
        line, column = line_and_column(body, len(body))
        return (
            f"{PREFIX}: invalid JSON at line {line}, column {column}: "
            "the body ends before the JSON is complete"
        )
    if "not application/json" in detail:
        return NOT_JSON
    if detail.startswith("JSON body is nested too deeply"):
        return f"{PREFIX}: the JSON is nested too deeply"
    return PREFIX
