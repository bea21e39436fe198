"""The SQL Server and Oracle readers' flow around their connections (``ConnectingReader``), with
fake connections: each call connects and closes after, whatever happens, and errors get the
engine's names."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import pytest

from adapters.datasources.mssql.reader import SqlServerReader
from adapters.datasources.oracle.reader import OracleReader
from adapters.datasources.oracle.statements import OracleColumn
from application.errors import DatasourceError, DatasourceQueryFailed, DatasourceUnavailable
from domain.connection import DatabaseType, Endpoint
from domain.schema import Column, Table, TableRead

MSSQL = Endpoint(
    type=DatabaseType.SQL_SERVER, host="db", port=1433, database_name="app", user_name="u",
    password="p",
)  # fmt: skip
ORACLE = Endpoint(
    type=DatabaseType.ORACLE, host="db", port=1521, database_name="app", user_name="u",
    password="p", options={"serviceName": "FREEPDB1"},
)  # fmt: skip


class _OdbcCursor:
    """aioodbc's cursor: every call awaited."""

    def __init__(self, log: list[str], batches: list[list[tuple[Any, ...]]]) -> None:
        self.log, self.batches = log, batches

    async def execute(self, sql: str, *params: Any) -> _OdbcCursor:
        self.log.append(sql.split()[0])
        return self

    async def fetchone(self) -> tuple[Any, ...]:
        return (1,)

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return [("dbo", "t", "id", "int"), ("dbo", "t", "note", "nvarchar")]

    async def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        if self.batches and self.batches[0] == [("boom",)]:
            raise RuntimeError("the server went away")
        return self.batches.pop(0) if self.batches else []

    async def close(self) -> None:
        self.log.append("cursor closed")


class _OdbcConnection:
    def __init__(self, batches: list[list[tuple[Any, ...]]] | None = None) -> None:
        self.log: list[str] = []
        self.batches = batches or []

    async def cursor(self) -> _OdbcCursor:
        return _OdbcCursor(self.log, self.batches)

    async def execute(self, sql: str, *params: Any) -> _OdbcCursor:
        return await _OdbcCursor(self.log, self.batches).execute(sql, *params)

    async def close(self) -> None:
        self.log.append("closed")


def _sql_server(monkeypatch: pytest.MonkeyPatch, connection: Any) -> SqlServerReader:
    opened: list[float] = []

    async def connect(endpoint: Endpoint, timeout: float) -> Any:
        opened.append(timeout)
        if isinstance(connection, BaseException):
            raise connection
        return connection

    reader = SqlServerReader(driver="fake", chunk_rows=2, connect_timeout=3.0)
    monkeypatch.setattr(reader, "_connect", connect)
    return reader


T = Table("dbo", "t", (Column("id", "int"), Column("note", "nvarchar")))
READ = TableRead("t", T, T.columns)


async def test_sql_server_reads_every_step_on_one_connection_and_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _OdbcConnection([[(1, "a"), (2, "b")], [(3, None)]])
    reader = _sql_server(monkeypatch, connection)
    prepared = reader.prepare(MSSQL, [READ, TableRead("t2", T, ())])
    chunks = [chunk async for chunk in reader.stream(MSSQL, prepared)]
    assert [(c.result_key, c.data, c.rows) for c in chunks] == [
        ("t", b'{"id":1,"note":"a"},{"id":2,"note":"b"}', 2),
        ("t", b'{"id":3,"note":null}', 1),
    ]
    assert connection.log == ["SELECT", "cursor closed", "closed"]


async def test_sql_server_closes_the_connection_when_the_consumer_stops_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _OdbcConnection([[(1, "a"), (2, "b")], [(3, None), (4, None)]])
    reader = _sql_server(monkeypatch, connection)
    async with aclosing(reader.stream(MSSQL, reader.prepare(MSSQL, [READ]))) as chunks:
        async for _ in chunks:
            break
    assert connection.log == ["SELECT", "cursor closed", "closed"]


async def test_sql_server_read_failure_is_a_query_failure_and_closes_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _OdbcConnection([[("boom",)]])
    reader = _sql_server(monkeypatch, connection)
    with pytest.raises(DatasourceQueryFailed):
        async for _ in reader.stream(MSSQL, reader.prepare(MSSQL, [READ])):
            pass
    assert connection.log == ["SELECT", "cursor closed", "closed"]


async def test_nothing_to_read_connects_to_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = _sql_server(monkeypatch, AssertionError("must not connect"))
    assert [c async for c in reader.stream(MSSQL, reader.prepare(MSSQL, []))] == []


async def test_sql_server_test_and_discovery_connect_and_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _OdbcConnection()
    reader = _sql_server(monkeypatch, connection)
    await reader.test(MSSQL, 1.0)
    schema = await reader.discover(MSSQL, [])
    assert [c.name for c in schema.tables["t"].columns] == ["id", "note"]
    assert connection.log == ["SELECT", "cursor closed", "closed"] * 2


async def test_a_discovery_that_fails_is_a_discovery_error_and_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _OdbcConnection()

    async def broken(sql: str, *params: Any) -> Any:
        raise RuntimeError("no catalogue")

    monkeypatch.setattr(connection, "execute", broken)
    reader = _sql_server(monkeypatch, connection)
    with pytest.raises(DatasourceError) as raised:
        await reader.discover(MSSQL, [])
    assert raised.value.stage == "discover"
    assert connection.log == ["closed"]


async def test_a_connection_refused_passes_with_its_engine_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = _sql_server(monkeypatch, DatasourceUnavailable("failed to connect to datasource"))
    with pytest.raises(DatasourceUnavailable):
        await reader.discover(MSSQL, [])
    with pytest.raises(DatasourceUnavailable):
        await reader.test(MSSQL, 1.0)


class _OracleCursor:
    def __init__(self, connection: _OracleConnection) -> None:
        self.connection = connection
        self.arraysize = self.prefetchrows = 0

    def __enter__(self) -> _OracleCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def execute(self, sql: str, params: Any = None, **options: Any) -> None:
        if self.connection.failing:
            raise RuntimeError("ORA-00000")
        self.connection.log.append(sql.split()[0])

    def close(self) -> None:
        self.connection.log.append("cursor closed")


class _OracleConnection:
    def __init__(self, *, failing: bool = False) -> None:
        self.log: list[str] = []
        self.failing = failing

    def cursor(self) -> _OracleCursor:
        return _OracleCursor(self)

    async def ping(self) -> None:
        self.log.append("ping")

    async def close(self) -> None:
        self.log.append("closed")


async def test_oracle_session_that_cannot_be_prepared_fails_the_query_and_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _OracleConnection(failing=True)

    async def connect(endpoint: Endpoint, timeout: float) -> _OracleConnection:
        return connection

    reader = OracleReader()
    monkeypatch.setattr(reader, "_connect", connect)
    table = Table("HR", "T", (OracleColumn("ID", "number(10,0)", "ID"),))
    prepared = reader.prepare(ORACLE, [TableRead("T", table, table.columns)])
    with pytest.raises(DatasourceQueryFailed):
        async for _ in reader.stream(ORACLE, prepared):
            pass
    assert connection.log == ["cursor closed", "closed"]
    connection.failing = False
    await reader.test(ORACLE, 1.0)
    assert connection.log[-2:] == ["ping", "closed"]
