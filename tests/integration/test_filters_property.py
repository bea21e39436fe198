"""Property: the rows a reader streams for random filters are the rows a plain Python
evaluation of the same filters selects, on PostgreSQL and on MariaDB.

The table has a few typed, nullable columns. Its text column uses collations that would leak if
the readers relied on them: a linguistic ICU collation on PostgreSQL (``'a' < 'B'``) and
MariaDB's default ``utf8mb4_general_ci`` (case-insensitive, ``'ß' = 's'``, trailing spaces
ignored). Values come from small domains so that filters often match; text holds quotes,
backslashes, comment markers, ``%``/``_`` and characters beyond the BMP. The evaluator follows SQL:
NULL matches only ``eq``/``in`` with ``null``; ``like`` is case-sensitive with ``\\`` escapes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.postgres.reader import PostgresReader
from application.ports.datasource_reader import DatasourceReader
from domain.connection import Endpoint
from domain.schema import Table, TableRead
from tests.integration.conftest import unique_name
from tests.integration.reader_helpers import (
    drop_databases,
    extract_rows,
    my_admin,
    my_endpoint,
    pg_admin,
    pg_endpoint,
    recreate_my_database,
    recreate_pg_database,
)

DATABASE = unique_name("fetcher_filters")
EXAMPLES = 50
END_OF_DAY = timedelta(days=1, microseconds=-1)

# name: (PostgreSQL type, MariaDB type)
COLUMNS: dict[str, tuple[str, str]] = {
    "i": ("integer", "INT"),
    "n": ("numeric(12,3)", "DECIMAL(12,3)"),
    "s": ('varchar(40) COLLATE "und-x-icu"', "VARCHAR(40)"),
    "b": ("boolean", "BOOLEAN"),
    "d": ("date", "DATE"),
    "ts": ("timestamp(6)", "DATETIME(6)"),
}
NAMES = list(COLUMNS)

# --- strategies ------------------------------------------------------------------------------

TEXT_ALPHABET = "aAbs ß%_\\'\";-/*ü😀"
values: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-3, 3),
    "n": st.decimals(min_value=-2, max_value=2, places=1).map(
        lambda v: (v if v else Decimal(0)).quantize(Decimal("0.001"))
    ),
    "s": st.sampled_from(["a", "A", "a ", "as", "aS", "As", "ß", "s", "", "a%", "a_"])
    | st.text(alphabet=TEXT_ALPHABET, max_size=3),
    "b": st.booleans(),
    "d": st.dates(date(2024, 1, 1), date(2024, 1, 4)),
    "ts": st.builds(
        lambda day, hour, micro: datetime(2024, 1, day, hour, 0, 0, micro),
        st.integers(1, 4),
        st.sampled_from([0, 12, 23]),
        st.sampled_from([0, 0, 500_000, 999_999]),
    ),
}


def _timestamp_forms(value: datetime) -> st.SearchStrategy[str]:
    shifted = value + timedelta(hours=2)
    return st.sampled_from(
        [
            value.isoformat(),
            value.isoformat(sep=" "),
            value.isoformat() + "Z",
            shifted.isoformat() + "+02:00",
            value.date().isoformat(),
            value.date().isoformat(),
        ]
    )


def _json_forms(name: str, value: Any) -> st.SearchStrategy[Any]:
    """``value`` in one of the JSON forms the API accepts for column ``name``."""
    if name == "i":
        return st.sampled_from([value, str(value), float(value)])
    if name == "n":
        return st.sampled_from([str(value), float(value)])
    if name == "b":
        return st.sampled_from([value, str(value).lower(), int(value)])
    if name == "d":
        return st.just(value.isoformat())
    if name == "ts":
        return _timestamp_forms(value)
    if name == "s":  # near misses: another case, a trailing space
        return st.sampled_from([value, value.swapcase(), value + " ", value.rstrip()])
    return st.just(value)


def _escaped(text: str) -> str:
    return re.sub(r"([%_\\])", r"\\\1", text)


LIKE_TOKENS = {
    "s": ["%", "_", "a", "A", "s", "S", "ß", " ", "ü", "😀", "'", "\\%", "\\_", "\\\\", "\\a"],
    "i": ["%", "_", "1", "2", "-", "0"],
    "n": ["%", "_", "0", "1", ".", "5", "-"],
}


def _like_patterns(name: str, present: Sequence[Any]) -> st.SearchStrategy[str]:
    tokens = st.lists(st.sampled_from(LIKE_TOKENS[name]), max_size=4).map("".join)
    if name != "s" or not present:
        return tokens
    # Patterns made from the rows' own text: exact, wrong case, wildcards at either end.
    derived = st.sampled_from(present).flatmap(
        lambda text: st.sampled_from(
            [_escaped(text), _escaped(text.swapcase()), _escaped(text[:1]) + "%",
             "%" + _escaped(text[-1:]), "_" * len(text), _escaped(text) + "_"]
        )
    )  # fmt: skip
    return st.one_of(tokens, derived)


@st.composite
def condition(draw: st.DrawFn, name: str, present: Sequence[Any]) -> dict[str, list[Any]]:
    """One field's condition; values are often taken from the rows (``present``)."""
    source = st.one_of(values[name], st.sampled_from(present)) if present else values[name]
    value = source.flatmap(lambda v: _json_forms(name, v))
    ops = ["eq", "gt", "gte", "lt", "lte", "between", "in", "nin", "ne"]
    if name in LIKE_TOKENS:
        ops += ["like"] * (3 if name == "s" else 1)
    chosen = draw(st.lists(st.sampled_from(ops), min_size=1, max_size=2, unique=True))
    result: dict[str, list[Any]] = {}
    for op in chosen:
        if op in ("eq", "in", "ne", "nin"):
            result[op] = draw(st.lists(st.none() | value, min_size=1, max_size=3))
        elif op == "between":
            result[op] = [draw(value), draw(value)]
        elif op == "like":
            result[op] = [draw(_like_patterns(name, present))]
        else:
            result[op] = [draw(value)]
    return result


# Text is where engines differ most (collations, padding, case), so it is filtered most often.
FILTERED = ["s", "s", "s", *NAMES]


@st.composite
def filters_for(draw: st.DrawFn, rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(FILTERED), min_size=1, max_size=2, unique=True))
    filters = {}
    for name in names:
        present = [row[NAMES.index(name)] for row in rows if row[NAMES.index(name)] is not None]
        filters[name] = draw(condition(name, present))
    return filters


Case = tuple[list[tuple[Any, ...]], list[dict[str, dict[str, list[Any]]]]]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Rows for one table, and a few filters to try on them."""
    rows = draw(st.lists(st.tuples(*(st.none() | values[n] for n in NAMES)), max_size=8))
    return rows, draw(st.lists(filters_for(rows), min_size=1, max_size=5))


# --- the plain Python evaluation -------------------------------------------------------------


def _like(pattern: str) -> re.Pattern[str]:
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            parts.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        index += 1
    return re.compile("".join(parts), re.DOTALL)


def _text_form(name: str, value: Any) -> str:
    return f"{value:.3f}" if name == "n" else str(value)


def _is_date_only(text: str) -> bool:
    return len(text) == len("2024-01-31")


def typed(name: str, value: Any) -> Any:
    """A filter value (one of the JSON forms ``_json_forms`` makes) as the column's Python value.

    Written here, apart from the readers' own conversion, so that a mistake there shows. A
    timestamp with an offset is the UTC instant (naive columns are read as UTC); a date alone is
    midnight."""
    if name in ("i", "n"):
        return Decimal(str(value))  # "2", 2.0 and 2 all mean 2; "-1.5" and -1.5 mean -1.5
    if name == "b":
        return value == "true" if isinstance(value, str) else bool(value)
    if name == "d":
        return date.fromisoformat(value)
    if name == "ts":
        if _is_date_only(value):
            return datetime.fromisoformat(value + "T00:00:00")
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return moment
    return value


def matches(name: str, op: str, raw: Sequence[Any], actual: Any) -> bool:
    if op in ("eq", "in"):
        wanted = [typed(name, v) for v in raw if v is not None]
        return (actual is None and None in raw) or (actual is not None and actual in wanted)
    if op in ("ne", "nin"):
        return actual is not None and actual not in [typed(name, v) for v in raw if v is not None]
    if actual is None:
        return False
    if op == "like":
        return _like(raw[0]).fullmatch(_text_form(name, actual)) is not None
    if op == "between":
        low, high = typed(name, raw[0]), typed(name, raw[1])
        if name == "ts" and _is_date_only(raw[1]):
            high += END_OF_DAY
        return bool(low <= actual <= high)
    bound = typed(name, raw[0])
    return bool(
        {
            "gt": actual > bound,
            "gte": actual >= bound,
            "lt": actual < bound,
            "lte": actual <= bound,
        }[op]
    )


def selected(row: Mapping[str, Any], filters: Mapping[str, Mapping[str, Sequence[Any]]]) -> bool:
    return all(
        matches(name, op, raw, row[name])
        for name, condition in filters.items()
        for op, raw in condition.items()
    )


def as_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as the readers emit it (the common result format)."""
    out = dict(row)
    if row["n"] is not None:
        out["n"] = str(row["n"])
    if row["d"] is not None:
        out["d"] = row["d"].isoformat()
    if row["ts"] is not None:
        stamp = row["ts"]
        fraction = f".{stamp.microsecond:06d}" if stamp.microsecond else ""
        out["ts"] = stamp.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
    return out


# --- the two engines -------------------------------------------------------------------------


@dataclass
class Engine:
    name: str
    reader: DatasourceReader
    endpoint: Endpoint
    load: Callable[[list[tuple[Any, ...]]], Any]
    table: Table | None = None


@dataclass
class Lab:
    runner: asyncio.Runner
    engines: dict[str, Engine]


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    runner = asyncio.Runner()
    closers: list[Callable[[], Any]] = []

    async def postgres() -> Engine:
        await recreate_pg_database(DATABASE)
        conn = await pg_admin(DATABASE)
        closers.append(conn.close)
        columns = ", ".join(f"{name} {pg} NULL" for name, (pg, _) in COLUMNS.items())
        await conn.execute(f"CREATE TABLE prop (id bigint PRIMARY KEY, {columns})")
        insert = (
            f"INSERT INTO prop VALUES ({', '.join(f'${i}' for i in range(1, len(COLUMNS) + 2))})"
        )

        async def load(rows: list[tuple[Any, ...]]) -> None:
            await conn.execute("TRUNCATE prop")
            await conn.executemany(insert, rows)

        return Engine("postgresql", PostgresReader(), pg_endpoint(DATABASE), load)

    async def mariadb() -> Engine:
        conn = await my_admin()
        closers.append(conn.close)
        cursor = await conn.cursor()
        await recreate_my_database(cursor, DATABASE)
        columns = ", ".join(f"{name} {my} NULL" for name, (_, my) in COLUMNS.items())
        await cursor.execute(f"CREATE TABLE prop (id BIGINT PRIMARY KEY, {columns})")
        insert = f"INSERT INTO prop VALUES ({', '.join(['%s'] * (len(COLUMNS) + 1))})"

        async def load(rows: list[tuple[Any, ...]]) -> None:
            await cursor.execute("DELETE FROM prop")
            if rows:
                await cursor.executemany(insert, rows)

        return Engine("mariadb", MySqlReader(), my_endpoint(DATABASE), load)

    async def prepare() -> dict[str, Engine]:
        found = {engine.name: engine for engine in [await postgres(), await mariadb()]}
        for engine in found.values():
            schema = await engine.reader.discover(engine.endpoint, [])
            engine.table = schema.tables["prop"]
        return found

    try:
        yield Lab(runner, runner.run(prepare()))
    finally:
        for close in closers:
            result = close()
            if asyncio.iscoroutine(result):
                runner.run(result)
        runner.run(drop_databases(DATABASE))
        runner.close()


async def _extract(engine: Engine, filters: Mapping[str, Mapping[str, Sequence[Any]]]) -> list:
    assert engine.table is not None
    conditions = {name: {op: tuple(v) for op, v in c.items()} for name, c in filters.items()}
    read = TableRead("prop", engine.table, engine.table.columns, conditions)
    rows = await extract_rows(engine.reader, engine.endpoint, read)
    return sorted(rows, key=lambda row: row["id"])


@pytest.mark.parametrize("engine_name", ["postgresql", "mariadb"])
@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(case=cases())
@example(
    case=(
        [(None, None, text, None, None, None) for text in ("a", "A", "a ", "s", "ß", "b", "")],
        [{"s": {"eq": ["a", "ß"]}}, {"s": {"in": ["A "]}}, {"s": {"ne": ["a"]}}],
    )
)
@example(
    case=(
        [(None, None, text, None, None, None) for text in ("a", "B", "b", "ü", "😀", None)],
        [{"s": {"gt": ["B"], "like": ["_"]}}, {"s": {"lte": ["b"]}}],
    )
)
@example(
    case=(
        [(None, None, text, None, None, None) for text in ("as", "As", "as ", "aß", "a%")],
        [{"s": {"like": ["a_"]}}, {"s": {"like": ["A%"]}}, {"s": {"like": ["a\\%"]}}],
    )
)
@example(
    case=(
        [(None, None, None, None, None, datetime(2024, 1, 2, 23, 0, 0, us)) for us in (0, 999_999)]
        + [(None, None, None, None, None, datetime(2024, 1, 3))],
        [{"ts": {"between": ["2024-01-01", "2024-01-02"]}}],
    )
)
@example(
    case=(
        [(None, None, None, None, None, datetime(2024, 1, 2, hour)) for hour in (12, 14)],
        [{"ts": {"eq": ["2024-01-02T14:00:00+02:00"]}}, {"ts": {"lt": ["2024-01-02T13:00Z"]}}],
    )
)
@example(
    case=(
        [(1, Decimal("0.500"), None, True, None, None), (None, None, None, None, None, None)],
        [{"i": {"ne": [2]}}, {"n": {"nin": ["0.5", None]}}, {"b": {"eq": [None, False]}}],
    )
)
def test_extract_returns_the_rows_python_selects(lab: Lab, engine_name: str, case: Case) -> None:
    rows, tries = case
    engine = lab.engines[engine_name]
    numbered = [(index + 1, *row) for index, row in enumerate(rows)]
    records = [dict(zip(["id", *NAMES], row, strict=True)) for row in numbered]
    lab.runner.run(engine.load(numbered))
    for filters in tries:
        expected = [as_json(record) for record in records if selected(record, filters)]
        event("some rows match" if expected else "no row matches")
        event("some rows filtered out" if len(expected) < len(records) else "none filtered out")
        assert lab.runner.run(_extract(engine, filters)) == expected, filters
