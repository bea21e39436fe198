"""The filter operators on Oracle: ``OracleRules`` for ``adapters.datasources.common.sql_filters``.

Text compares exactly, as on every engine: a bound string against ``VARCHAR2`` compares without
blank padding, and binary, since every extraction session runs ``SESSION_SQL`` first, setting
``NLS_COMP`` and ``NLS_SORT`` to ``BINARY`` (the defaults, but an instance parameter or a logon
trigger may make them linguistic). An empty string is refused as a value (Oracle stores it as
NULL). ``DATE`` carries a time of day, so it is filtered as a timestamp; time-zone columns
compare in UTC; ``CLOB`` comparisons use its first 4000 characters; see ``OracleRules`` for the
details and the limits.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import String, cast, func
from sqlalchemy.sql.elements import ColumnElement

from adapters.datasources.oracle.values import LOB_TEXT, TZ_TYPES, base_type
from adapters.datasources.common.sql_filters import LIKE_ESCAPE, FilterRules, Kind, column_kind
from adapters.datasources.common.sql_values import Unconvertible

# Run first in every extraction session: OracleRules rely on binary text comparison, whatever
# the instance parameters or a logon trigger set.
SESSION_SQL = "ALTER SESSION SET NLS_COMP = BINARY NLS_SORT = BINARY"


def like_pattern(pattern: str) -> str:
    """A ``like`` pattern Oracle accepts with ``ESCAPE '\\'``: an escape only before ``%``,
    ``_`` or ``\\`` (elsewhere it stands for the next character). A pattern ending with a lone
    escape is left as it is: the filter builder refuses it, as on every engine."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            following = pattern[i + 1]
            out.append("\\" + following if following in "%_\\" else following)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


class OracleRules(FilterRules):
    """The operators' common meaning on Oracle.

    Text compares as Oracle compares ``VARCHAR2`` with a bound string: no blank padding (a bind
    variable is not ``CHAR``, so ``CHAR(n)`` values compare as stored, padded, as the result
    shows them), and binary, because every extraction session sets ``NLS_COMP = BINARY`` and
    ``NLS_SORT = BINARY`` (the defaults, which an instance parameter or a logon trigger may
    change to a linguistic, case-insensitive comparison): byte order of the database character
    set, which for AL32UTF8 is code point order, and UTF-16 code unit order for ``NVARCHAR2``
    under AL16UTF16 (characters above U+FFFF before U+E000-U+FFFF). ``like`` is binary under
    the same settings. Limit: a column declared with a collation of its own (Oracle 12.2 and
    later, ``MAX_STRING_SIZE = EXTENDED`` only) compares by it; adding ``COLLATE BINARY`` is
    not an option, since databases with ``MAX_STRING_SIZE = STANDARD`` refuse it (ORA-43929).

    Oracle stores an empty string as NULL, so a filter value ``""`` compared as text could not
    mean what it means elsewhere (``ne ""`` would match nothing): it is refused.

    ``DATE`` carries a time of day, so it is filtered as a timestamp; time-zone columns compare
    in UTC (``sys_extract_utc``, as the result shows them); ``CLOB``/``NCLOB`` compare their
    first 4,000 characters (``=``/``<`` cannot take a LOB) and ``like`` matches the whole LOB;
    ``BOOLEAN`` (23ai) matches ``like`` as ``true``/``false``; in ``like`` patterns a ``\\``
    before a character other than ``%``, ``_`` or ``\\`` stands for that character
    (``like_pattern``), as on the other engines (Oracle would reject it).
    """

    def kind(self, data_type: str) -> Kind:
        base = base_type(data_type)
        if base == "date" or base in TZ_TYPES:
            return Kind.TIMESTAMP
        return column_kind(data_type)

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        if value == "" and kind in (Kind.TEXT, Kind.OTHER):
            raise Unconvertible("a non-empty string (Oracle stores an empty string as NULL)")
        return value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        base = base_type(data_type)
        if base in TZ_TYPES:
            return func.sys_extract_utc(column)
        if base in LOB_TEXT:
            return func.dbms_lob.substr(column, 4000, 1)
        return super().compared(column, kind, data_type)

    def like(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, pattern: str
    ) -> ColumnElement[bool]:
        if kind is Kind.TEXT:
            target = column
        elif kind is Kind.BOOLEAN:
            target = func.lower(cast(column, String))
        else:
            target = cast(self.compared(column, kind, data_type), String)
        return target.like(like_pattern(pattern), escape=LIKE_ESCAPE)


RULES = OracleRules()
