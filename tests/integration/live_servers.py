"""Where the SQL Server and Oracle live tests find a server: a URL in the environment, else a
container through testcontainers when a Docker engine answers, else they are skipped
(``sql_server``, ``oracle_server``); and how they run set-up statements there."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from domain.connection import DatabaseType, Endpoint


def docker_reachable() -> bool:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1)
                sock.connect(host[len("unix://") :])
            return True
        parts = urlsplit(host)
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 2375), 1):
            return True
    except OSError:
        return False


def endpoint_from_url(url: str, db_type: DatabaseType) -> Endpoint:
    """``scheme://user:password@host:port/name?ssl=mode&...``; for Oracle the path is the service
    name, other query pairs become ``options``."""
    parts = urlsplit(url)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    name = unquote(parts.path.lstrip("/"))
    options: dict[str, str] = {k: v for k, v in query.items() if k != "ssl"}
    if db_type is DatabaseType.ORACLE:
        options["serviceName"] = name
    return Endpoint(
        type=db_type,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 0,
        database_name=name,
        user_name=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        ssl_mode=query.get("ssl", ""),
        options=options,
    )


@contextmanager
def container(image: str, port: int, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A started container (testcontainers), as the host and port its ``port`` is mapped to."""
    from testcontainers.core.container import DockerContainer

    box = DockerContainer(image).with_exposed_ports(port)
    for key, value in env.items():
        box = box.with_env(key, value)
    with box:
        yield box.get_container_host_ip(), int(box.get_exposed_port(port))


def wait_until_ready(check: Callable[[], Awaitable[None]], seconds: float) -> None:
    async def poll() -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            try:
                await check()
                return
            except Exception:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(2)

    asyncio.run(poll())


# --- SQL Server --------------------------------------------------------------------------------

MSSQL_SKIP_REASON = "no SQL Server reachable: set FETCHER_TEST_MSSQL_URL or run a Docker engine"
MSSQL_IMAGE = "mcr.microsoft.com/mssql/server:2022-latest"
MSSQL_SA_PASSWORD = "Fetcher-test-1"  # a throw-away container's password, not a secret


@contextmanager
def sql_server() -> Iterator[Endpoint]:
    """An administrator's endpoint on a SQL Server: ``FETCHER_TEST_MSSQL_URL``
    (``mssql://user:password@host:1433/database?driver=FreeTDS&ssl=true``), else a container
    when a Docker engine is reachable; otherwise the test is skipped, saying so."""
    from adapters.datasources.mssql.reader import SqlServerReader

    url = os.environ.get("FETCHER_TEST_MSSQL_URL")
    if url:
        yield endpoint_from_url(url, DatabaseType.SQL_SERVER)
        return
    if not docker_reachable():
        pytest.skip(MSSQL_SKIP_REASON)
    env = {"ACCEPT_EULA": "Y", "MSSQL_SA_PASSWORD": MSSQL_SA_PASSWORD}
    with container(MSSQL_IMAGE, 1433, env) as (host, port):
        admin = Endpoint(
            type=DatabaseType.SQL_SERVER, host=host, port=port, database_name="master",
            user_name="sa", password=MSSQL_SA_PASSWORD,
        )  # fmt: skip
        wait_until_ready(lambda: SqlServerReader().test(admin, 5), 180)
        yield admin


async def mssql_execute(endpoint: Endpoint, statements: Sequence[str]) -> None:
    """Runs ``statements`` in autocommit on the SQL Server of ``endpoint``."""
    import aioodbc

    from adapters.datasources.mssql.connection import connection_string
    from adapters.datasources.mssql.reader import SqlServerReader

    driver = endpoint.options.get("driver") or SqlServerReader().driver()
    async with aioodbc.connect(dsn=connection_string(endpoint, driver), autocommit=True) as conn:
        for sql in statements:
            cursor = await conn.execute(sql)
            await cursor.close()


# --- Oracle ------------------------------------------------------------------------------------

ORACLE_SKIP_REASON = "no Oracle reachable: set FETCHER_TEST_ORACLE_URL or run a Docker engine"
ORACLE_IMAGE = "gvenzl/oracle-free:slim-faststart"
ORACLE_APP_PASSWORD = "fetcher-test"  # a throw-away container's password, not a secret


@contextmanager
def oracle_server() -> Iterator[Endpoint]:
    """An application user's endpoint on an Oracle database: ``FETCHER_TEST_ORACLE_URL``
    (``oracle://user:password@host:1521/SERVICE_NAME``), else a container (Oracle Database Free)
    when a Docker engine is reachable; otherwise the test is skipped, saying so."""
    from adapters.datasources.oracle.reader import OracleReader

    url = os.environ.get("FETCHER_TEST_ORACLE_URL")
    if url:
        yield endpoint_from_url(url, DatabaseType.ORACLE)
        return
    if not docker_reachable():
        pytest.skip(ORACLE_SKIP_REASON)
    env = {
        "ORACLE_PASSWORD": ORACLE_APP_PASSWORD,
        "APP_USER": "fetcher",
        "APP_USER_PASSWORD": ORACLE_APP_PASSWORD,
    }
    with container(ORACLE_IMAGE, 1521, env) as (host, port):
        target = Endpoint(
            type=DatabaseType.ORACLE, host=host, port=port, database_name="FREEPDB1",
            user_name="fetcher", password=ORACLE_APP_PASSWORD,
            options={"serviceName": "FREEPDB1"},
        )  # fmt: skip
        wait_until_ready(lambda: OracleReader().test(target, 5), 300)
        yield target


async def oracle_execute(endpoint: Endpoint, statements: Sequence[str]) -> None:
    """Runs ``statements`` on the Oracle database of ``endpoint``, then commits."""
    import oracledb

    connection = await oracledb.connect_async(
        user=endpoint.user_name, password=endpoint.password, host=endpoint.host,
        port=endpoint.port, service_name=endpoint.options["serviceName"],
    )  # fmt: skip
    try:
        with connection.cursor() as cursor:
            for sql in statements:
                await cursor.execute(sql)
        await connection.commit()
    finally:
        await connection.close()
