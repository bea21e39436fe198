"""Discovered database schemas and the per-table read plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    data_type: str
    """The engine's own type name, lower-case (``integer``, ``timestamp with time zone``...)."""


@dataclass(frozen=True, slots=True)
class Table:
    schema: str | None
    name: str
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None


@dataclass(frozen=True, slots=True)
class Schema:
    """Tables by their normalised name (``accounts``, ``sales.orders``)."""

    tables: Mapping[str, Table]


@dataclass(frozen=True, slots=True)
class TableRead:
    """One table to read: where from, which columns, which rows, and its key in the result."""

    result_key: str
    table: Table
    columns: tuple[Column, ...]
    filters: Mapping[str, Mapping[str, tuple[Any, ...]]] = field(default_factory=dict)
