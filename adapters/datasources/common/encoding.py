"""The common result format: how every reader turns rows into JSON objects.

One JSON object per row, keys sorted by code point, encoded by msgspec through a struct type built
once per table (``row_builder``; plain dicts for tables with a column name msgspec cannot rename a
struct field to: one holding ``"``, ``\\`` or a control character). The PostgreSQL and MySQL
readers build rows with ``row_builder``/``row_factory`` directly; the SQL Server and Oracle
readers through ``RowEncoder``. A few per-column converters fix what a driver's Python values
would otherwise encode differently from the PostgreSQL reader:

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

import functools
import gc
import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import starmap
from typing import Any

import msgspec

Converter = Callable[[Any], Any]

_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_FLOAT32 = struct.Struct("<f")


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
    packed = _FLOAT32.pack(value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        try:
            if _FLOAT32.pack(candidate) == packed:
                return candidate
        except OverflowError:  # rounded up past the largest single-precision value
            continue
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


# msgspec refuses these in the encoded name of a struct field.
_UNRENAMABLE = re.compile(r'["\\\x00-\x1f]')


def row_builder(names: Sequence[str]) -> Callable[..., Any]:
    """Builds one row object from its values in ``names`` order (sorted), which msgspec encodes
    as a JSON object with those keys: a struct type built once (fast), or plain dicts when a
    name holds a character msgspec cannot rename a field to (``"``, ``\\``, control).

    The same names give the same builder: a struct type is made once per set of names, not per
    job (making one, and msgspec's first encoding of it, cost more than a small job's rows)."""
    return _row_builder(tuple(names))


@functools.lru_cache(maxsize=1024)
def _row_builder(names: tuple[str, ...]) -> Callable[..., Any]:
    if any(_UNRENAMABLE.search(name) for name in names):
        keys = names
        return lambda *values: dict(zip(keys, values, strict=True))
    fields = [(f"f{i}", Any) for i in range(len(names))]
    return msgspec.defstruct(
        "Row", fields, rename={f"f{i}": name for i, name in enumerate(names)}, gc=False
    )


def row_factory(
    names: Sequence[str], converters: Mapping[int, Converter] | None = None
) -> Callable[..., Any]:
    """``row_builder(names)``, with ``converters`` (column position → function) applied to the
    non-null values of their columns first."""
    row = row_builder(names)
    if not converters:
        return row
    ordered = tuple(sorted(converters.items()))

    def build(*record: Any) -> Any:
        values = list(record)
        for index, convert in ordered:
            value = values[index]
            if value is not None:
                values[index] = convert(value)
        return row(*values)

    return build


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
        self._row = row_factory(self.names, converters)
        self._encode = msgspec.json.Encoder(enc_hook=enc_hook).encode

    def encode(self, rows: Sequence[Sequence[Any]]) -> bytes:
        if not rows:
            return b""
        return self._encode(list(starmap(self._row, rows)))[1:-1]
