"""Redaction of error texts that leave the worker (reference §5.8), plus secret-shaped fragments
the reference misses (``password=...`` pairs and URI user info)."""

from __future__ import annotations

import re

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\w+://[^\s]+", re.ASCII), "[redacted]"),
    (
        re.compile(r"\b(dial (?:tcp|udp)|read tcp|write tcp|lookup)\s+\S+", re.ASCII),
        r"\1 [redacted]",
    ),
    (re.compile(r"Addr:\s+\S+", re.ASCII), "Addr: [redacted]"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", re.ASCII), "[redacted]"),
    (
        re.compile(r"\b(password|passwd|pwd|secret|token)\s*=\s*\S+", re.ASCII | re.I),
        r"\1=[redacted]",
    ),
)


def redact(text: str) -> str:
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
