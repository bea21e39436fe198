"""`make walkthrough-db` prepares the README walk-through's table, idempotently, and says in one
line what it needs when it cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.integration.conftest import require_listening, unique_name

ROOT = Path(__file__).resolve().parents[2]
ADMIN = os.environ.get("FETCHER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def run(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "walkthrough_db.py"), url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def database():
    require_listening(ADMIN, "PostgreSQL")
    name = unique_name("fetcher_walkthrough")
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_walkthrough_table_is_created_once(database):
    for _ in range(2):
        result = run(database)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("walkthrough_accounts is ready in 127.0.0.1:5432/")
    with psycopg.connect(database) as connection:
        rows = connection.execute(
            "SELECT id, email, balance::text FROM walkthrough_accounts ORDER BY id"
        ).fetchall()
    assert rows == [(1, "a@example.com", "10.50"), (2, "b@example.com", "7.00")]


def test_an_unreachable_database_says_what_the_walkthrough_needs():
    result = run("postgresql://postgres:secret@127.0.0.1:1/nowhere")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("walkthrough-db: cannot prepare 127.0.0.1:1/nowhere: ")
    assert "needs a PostgreSQL you can write to" in lines[1]
    assert "secret" not in result.stderr
