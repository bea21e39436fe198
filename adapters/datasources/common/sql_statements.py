"""What the SQL engines' ``statements`` modules share: compiling a SQLAlchemy statement for a
driver, the columns a read asks for, always-quoted identifiers (SQL Server, Oracle), and the
statement of the readers that encode through ``RowEncoder`` (SQL Server, Oracle).

Each engine keeps its own dialect (placeholders, quoting, casts) and its ``to_<driver>``
function; ``compiled`` and ``positional`` are the compilation they all run: post-compile
parameters rendered (``IN`` lists expanded), the values in the order the placeholders take them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from typing import cast as typing_cast

from sqlalchemy import column, table
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, quoted_name
from sqlalchemy.sql.selectable import TableClause

from adapters.datasources.common.encoding import Converter, RowEncoder
from domain.schema import Column, TableRead

P = TypeVar("P")


def compiled(statement: ClauseElement, dialect: Dialect) -> SQLCompiler:
    """``statement`` compiled for ``dialect``, expanding parameters (``IN`` lists) into the text."""
    return typing_cast(
        SQLCompiler,
        statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True}),
    )


def positional(statement: ClauseElement, dialect: Dialect) -> tuple[str, tuple[Any, ...]]:
    """SQL text with the dialect's positional placeholders, and the values in their order."""
    built = compiled(statement, dialect)
    return built.string, tuple(built.params[name] for name in built.positiontup or ())


def quoted(name: str) -> quoted_name:
    """An identifier quoted as it is spelled, whatever its case (no case folding)."""
    return quoted_name(name, quote=True)


def quoted_table(name: str, schema: str | None, columns: Iterable[str]) -> TableClause:
    """A table with the columns a statement uses, every identifier ``quoted``."""
    return table(
        quoted(name),
        *(column(quoted(n)) for n in columns),
        schema=quoted(schema) if schema else None,
    )


def requested(read: TableRead) -> tuple[dict[str, Column], list[str]]:
    """The columns ``read`` asks for by name, and their names in result order (sorted); no
    names: nothing to read."""
    chosen = {c.name: c for c in read.columns}
    return chosen, sorted(chosen)


@dataclass(frozen=True, slots=True)
class EncodedStatement(Generic[P]):
    """One table's read by a reader that encodes rows through ``RowEncoder``: SQL text, its
    values as the driver takes them (``P``), and the encoder of its rows."""

    result_key: str
    sql: str
    params: P
    encoder: RowEncoder


def encoded_statement(
    read: TableRead,
    chosen: dict[str, Column],
    names: Sequence[str],
    compiled_sql: tuple[str, P],
    converter: Callable[[str], Converter | None],
) -> EncodedStatement[P]:
    """The statement of ``read`` from its compiled SQL; each column of ``names`` (the result's
    order) whose type ``converter`` gives a function for has its values converted by it."""
    converters = {
        i: f for i, n in enumerate(names) if (f := converter(chosen[n].data_type)) is not None
    }
    sql, params = compiled_sql
    return EncodedStatement(read.result_key, sql, params, RowEncoder(names, converters))
