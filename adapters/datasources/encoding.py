"""The common result format for rows read through a DB-API driver (SQL Server, Oracle, MongoDB).

One JSON object per row, keys sorted by code point, encoded by msgspec through a struct type built
once per table; a few per-column converters fix what the driver's Python values would otherwise
encode differently from the PostgreSQL reader:

=========================  =========================================================================
Python value               JSON value
=========================  =========================================================================
int                        number (exact digits)
float                      number, shortest round-trip; NaN/±Infinity as ``"NaN"``, ``"Infinity"``,
                           ``"-Infinity"`` (``finite_float``); single-precision columns as their
                           shortest single-precision text (``float32``)
Decimal                    string with the exact digits
bool                       ``true`` / ``false``
str                        string
date                       ``"YYYY-MM-DD"``
datetime                   RFC 3339 in UTC, ``"2024-01-02T03:04:05Z"``; naive values are read as UTC
                           (``utc``); fractions as 6 digits when non-zero
time                       ``"HH:MM:SS[.ffffff]"``
timedelta                  ISO 8601 duration (``"P1DT2H3M4.5S"``, ``iso_duration``)
UUID                       canonical lower-case string
bytes                      standard base64 string
dict / list                embedded as JSON
=========================  =========================================================================
"""

from __future__ import annotations

import gc
import math
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import starmap
from typing import Any

import msgspec

Converter = Callable[[Any], Any]

_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def utc(value: datetime) -> datetime:
    """An aware UTC datetime: naive values are taken as UTC, aware ones converted."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def finite_float(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if value != value else _NON_FINITE[value]


def float32(value: float) -> float | str:
    """The shortest decimal that reads back as the same single-precision value (``1.1``, not
    ``1.100000023841858``)."""
    if not math.isfinite(value):
        return finite_float(value)
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.pack("<f", candidate) == packed:
            return candidate
    return value


def iso_duration(value: timedelta) -> str:
    """``P1DT2H3M4.5S``, the form the PostgreSQL reader gives intervals (``PT0S`` when zero)."""
    sign = "-" if value < timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if value.microseconds:
        clock += f"{seconds}.{value.microseconds:06d}".rstrip("0") + "S"
    elif seconds:
        clock += f"{seconds}S"
    days = f"{value.days}D" if value.days else ""
    if not days and not clock:
        return "PT0S"
    return f"{sign}P{days}" + (f"T{clock}" if clock else "")


def row_type(names: Sequence[str]) -> type[msgspec.Struct]:
    """A struct whose fields encode as ``names`` (already sorted) in this order."""
    fields = [(f"f{i}", Any) for i in range(len(names))]
    return msgspec.defstruct(
        "Row", fields, rename={f"f{i}": name for i, name in enumerate(names)}, gc=False
    )


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pauses the cyclic GC while a chunk is fetched and encoded (many short-lived objects),
    never while the consumer holds control."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class RowEncoder:
    """Encodes rows (tuples in ``names`` order) as ``{...},{...}`` without brackets.

    ``converters`` maps a column position to a function applied to its non-null values.
    """

    def __init__(
        self,
        names: Sequence[str],
        converters: Mapping[int, Converter] | None = None,
        enc_hook: Callable[[Any], Any] | None = None,
    ) -> None:
        self.names = tuple(names)
        self._row = row_type(self.names)
        self._converters = tuple(sorted((converters or {}).items()))
        self._encode = msgspec.json.Encoder(enc_hook=enc_hook).encode

    def encode(self, rows: Sequence[Sequence[Any]]) -> bytes:
        if not rows:
            return b""
        if not self._converters:
            return self._encode(list(starmap(self._row, rows)))[1:-1]
        converters = self._converters
        structs = []
        for row in rows:
            values = list(row)
            for index, convert in converters:
                value = values[index]
                if value is not None:
                    values[index] = convert(value)
            structs.append(self._row(*values))
        return self._encode(structs)[1:-1]
