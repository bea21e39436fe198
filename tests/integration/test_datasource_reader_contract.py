"""The datasource reader contract on every real engine: PostgreSQL, MariaDB and the MongoDB-protocol
server on loopback; SQL Server and Oracle where ``FETCHER_TEST_MSSQL_URL`` /
``FETCHER_TEST_ORACLE_URL`` (or a Docker engine) gives one, skipped with that reason elsewhere.

Each engine gets the contract's two tables in a database of its own (a unique name where the
test creates the database), dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from pymongo import AsyncMongoClient

from adapters.datasources.mongodb.reader import MongoReader
from adapters.datasources.mssql.reader import SqlServerReader
from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.oracle.reader import OracleReader
from adapters.datasources.postgres.reader import PostgresReader
from domain.connection import DatabaseType, Endpoint
from tests.contracts.datasource_reader import PEOPLE, ContractTables, DatasourceReaderContract
from tests.integration.conftest import require_listening
from tests.integration.live_servers import (
    mssql_execute,
    oracle_execute,
    oracle_server,
    sql_server,
)
from tests.integration.reader_helpers import (
    drop_databases,
    endpoint_with,
    my_admin,
    my_endpoint,
    pg_admin,
    pg_endpoint,
    recreate_my_database,
    recreate_pg_database,
)

DATABASE = f"fetcher_contract_{os.getpid()}_{uuid.uuid4().hex[:6]}"
LOWER = ContractTables(people="contract_people", empty="contract_empty", id="id", name="name")
VALUES = ", ".join(f"({id_}, '{name}')" for id_, name in PEOPLE)


# --- PostgreSQL and MariaDB --------------------------------------------------------------------


async def _create_pg() -> None:
    await recreate_pg_database(DATABASE)
    conn = await pg_admin(DATABASE)
    try:
        await conn.execute(
            "CREATE TABLE contract_people (id integer, name text);"
            f"INSERT INTO contract_people VALUES {VALUES};"
            "CREATE TABLE contract_empty (id integer)"
        )
    finally:
        await conn.close()


async def _create_mariadb() -> None:
    admin = await my_admin()
    try:
        async with admin.cursor() as cursor:
            await recreate_my_database(cursor, DATABASE)
            await cursor.execute("CREATE TABLE contract_people (id int, name varchar(20))")
            await cursor.execute(f"INSERT INTO contract_people VALUES {VALUES}")
            await cursor.execute("CREATE TABLE contract_empty (id int)")
    finally:
        admin.close()


@pytest.fixture(scope="module")
def sql_databases() -> Iterator[None]:
    try:
        asyncio.run(_create_pg())
        asyncio.run(_create_mariadb())
    except OSError as error:
        pytest.fail(f"PostgreSQL or MariaDB is not reachable ({error})", pytrace=False)
    yield
    asyncio.run(drop_databases(DATABASE))


class TestPostgresReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> PostgresReader:
        return PostgresReader(connect_timeout=5)

    @pytest.fixture
    def endpoint(self, sql_databases: None) -> Endpoint:
        return pg_endpoint(DATABASE)

    @pytest.fixture
    def unreachable(self, endpoint: Endpoint) -> Endpoint:
        return endpoint_with(endpoint, port=1)

    @pytest.fixture
    def tables(self) -> ContractTables:
        return LOWER


class TestMySqlReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> MySqlReader:
        return MySqlReader(connect_timeout=5)

    @pytest.fixture
    def endpoint(self, sql_databases: None) -> Endpoint:
        return my_endpoint(DATABASE)

    @pytest.fixture
    def unreachable(self, endpoint: Endpoint) -> Endpoint:
        return endpoint_with(endpoint, port=1)

    @pytest.fixture
    def tables(self) -> ContractTables:
        return LOWER


# --- MongoDB (SecantusDB) ----------------------------------------------------------------------

MONGO_URL = os.environ.get("FETCHER_TEST_MONGO_URL", "mongodb://127.0.0.1:27018")


def _mongo_endpoint() -> Endpoint:
    parts = urlsplit(MONGO_URL)
    return Endpoint(
        type=DatabaseType.MONGODB, host=parts.hostname or "127.0.0.1", port=parts.port or 27017,
        database_name=DATABASE, user_name="", password="",
    )  # fmt: skip


def _mongo_client() -> AsyncMongoClient[dict[str, Any]]:
    parts = urlsplit(MONGO_URL)
    return AsyncMongoClient(host=parts.hostname or "127.0.0.1", port=parts.port or 27017)


async def _create_mongo() -> None:
    client = _mongo_client()
    try:
        await client.drop_database(DATABASE)
        db = client[DATABASE]
        await db.contract_people.insert_many([{"_id": i, "name": n} for i, n in PEOPLE])
        await db.create_collection("contract_empty")
    finally:
        await client.close()


async def _drop_mongo() -> None:
    client = _mongo_client()
    try:
        await client.drop_database(DATABASE)
    finally:
        await client.close()


@pytest.fixture(scope="module")
def mongo_database() -> Iterator[None]:
    require_listening(MONGO_URL, "the MongoDB test server")
    asyncio.run(_create_mongo())
    yield
    asyncio.run(_drop_mongo())


class TestMongoReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> MongoReader:
        return MongoReader(connect_timeout=2)

    @pytest.fixture
    def endpoint(self, mongo_database: None) -> Endpoint:
        return _mongo_endpoint()

    @pytest.fixture
    def unreachable(self, endpoint: Endpoint) -> Endpoint:
        return endpoint_with(endpoint, port=1)

    @pytest.fixture
    def tables(self) -> ContractTables:
        return ContractTables(
            people="contract_people", empty="contract_empty", id="_id", name="name"
        )


# --- SQL Server and Oracle, where a server is given ------------------------------------------

MSSQL_DATABASE = "fetcher_contract_test"


@pytest.fixture(scope="module")
def mssql_endpoint() -> Iterator[Endpoint]:
    with sql_server() as admin:
        create = f"IF DB_ID('{MSSQL_DATABASE}') IS NULL CREATE DATABASE {MSSQL_DATABASE}"
        asyncio.run(mssql_execute(admin, [create]))
        target = endpoint_with(admin, database_name=MSSQL_DATABASE)
        asyncio.run(
            mssql_execute(
                target,
                [
                    "DROP TABLE IF EXISTS dbo.contract_people, dbo.contract_empty",
                    "CREATE TABLE dbo.contract_people (id int, name nvarchar(20))",
                    f"INSERT INTO dbo.contract_people VALUES {VALUES}",
                    "CREATE TABLE dbo.contract_empty (id int)",
                ],
            )
        )
        yield target


class TestSqlServerReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self, mssql_endpoint: Endpoint) -> SqlServerReader:
        return SqlServerReader(driver=mssql_endpoint.options.get("driver"), connect_timeout=5)

    @pytest.fixture
    def endpoint(self, mssql_endpoint: Endpoint) -> Endpoint:
        return mssql_endpoint

    @pytest.fixture
    def unreachable(self, endpoint: Endpoint) -> Endpoint:
        return endpoint_with(endpoint, port=1)

    @pytest.fixture
    def tables(self) -> ContractTables:
        return LOWER


_ORACLE_DROP = """BEGIN
  FOR t IN (SELECT table_name FROM user_tables
            WHERE table_name IN ('CONTRACT_PEOPLE', 'CONTRACT_EMPTY')) LOOP
    EXECUTE IMMEDIATE 'DROP TABLE "' || t.table_name || '" PURGE';
  END LOOP;
END;"""


@pytest.fixture(scope="module")
def oracle_endpoint() -> Iterator[Endpoint]:
    with oracle_server() as target:
        rows = [f"INSERT INTO CONTRACT_PEOPLE VALUES ({i}, '{n}')" for i, n in PEOPLE]
        asyncio.run(
            oracle_execute(
                target,
                [
                    _ORACLE_DROP,
                    "CREATE TABLE CONTRACT_PEOPLE (ID NUMBER(10), NAME VARCHAR2(20))",
                    *rows,
                    "CREATE TABLE CONTRACT_EMPTY (ID NUMBER(10))",
                ],
            )
        )
        yield target


class TestOracleReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> OracleReader:
        return OracleReader(connect_timeout=5)

    @pytest.fixture
    def endpoint(self, oracle_endpoint: Endpoint) -> Endpoint:
        return oracle_endpoint

    @pytest.fixture
    def unreachable(self, endpoint: Endpoint) -> Endpoint:
        return endpoint_with(endpoint, port=1)

    @pytest.fixture
    def tables(self) -> ContractTables:
        return ContractTables(
            people="CONTRACT_PEOPLE", empty="CONTRACT_EMPTY", id="ID", name="NAME"
        )
