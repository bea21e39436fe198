"""Shared fixtures for integration tests: each talks to a real server on loopback.

The servers are started by ``deploy/services.sh start``; a fixture whose server is not reachable
fails (never skips), so a missing server cannot pass silently.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from adapters.storage.s3 import S3Settings

_HERE = Path(__file__).parent
RUN_ID = uuid.uuid4().hex[:8]


def unique_name(prefix: str) -> str:
    """``prefix`` made unique to this test run (not only this process: containers sharing a
    server can have the same PID), so runs that share the servers never meet."""
    return f"{prefix}_{RUN_ID}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees every collected item, not only those below this folder.
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.integration)


def require_listening(url: str, what: str) -> None:
    """Fail the test unless something accepts TCP connections at ``url``'s host and port."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        with socket.create_connection((host, port), timeout=2):
            return
    except OSError as e:
        pytest.fail(
            f"{what} is not reachable at {host}:{port} ({e.strerror or e}); "
            "run `deploy/services.sh start` first",
            pytrace=False,
        )


# --- S3-compatible storage (nanio) -------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_settings() -> S3Settings:
    endpoint = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:9100")
    require_listening(endpoint, "the S3 test server")
    return S3Settings(
        endpoint_url=endpoint,
        bucket=os.environ.get("FETCHER_TEST_S3_BUCKET", "fetcher-test"),
        access_key_id=os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test"),
        secret_access_key=os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret"),
        use_path_style=True,
    )


# --- PostgreSQL -------------------------------------------------------------------------------

PG_ADMIN_DSN = os.environ.get(
    "FETCHER_TEST_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@contextlib.contextmanager
def fresh_pg_database(prefix: str) -> Iterator[str]:
    """Creates a uniquely named database, yields its URL, and drops it afterwards."""
    require_listening(PG_ADMIN_DSN, "PostgreSQL")
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield PG_ADMIN_DSN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
