"""Creates the small table of the README's walk-through: `make walkthrough-db`.

    python deploy/walkthrough_db.py [POSTGRESQL_URL]

The URL defaults to postgresql://postgres@127.0.0.1:5432/test (the local PostgreSQL of the
development machines); the table is walkthrough_accounts in its public schema. Idempotent.
"""

from __future__ import annotations

import asyncio
import sys
from urllib.parse import urlsplit

import asyncpg

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS walkthrough_accounts (
        id int PRIMARY KEY, email text, balance numeric(12,2), opened timestamptz DEFAULT now())""",
    """INSERT INTO walkthrough_accounts (id, email, balance)
       VALUES (1, 'a@example.com', 10.50), (2, 'b@example.com', 7)
       ON CONFLICT DO NOTHING""",
)


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else DEFAULT_URL
    parts = urlsplit(url)
    where = f"{parts.hostname}:{parts.port or 5432}/{parts.path.lstrip('/')}"
    try:
        rows = asyncio.run(prepare(url))
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
        message = " ".join(str(error).split())
        print(f"walkthrough-db: cannot prepare {where}: {message}", file=sys.stderr)
        print(
            "walkthrough-db: the walk-through needs a PostgreSQL you can write to; give its URL: "
            "make walkthrough-db WALKTHROUGH_DB=postgresql://user:pass@host:5432/db",
            file=sys.stderr,
        )
        return 1
    print(f"walkthrough_accounts is ready in {where} ({rows} rows)")
    return 0


async def prepare(url: str) -> int:
    """Creates and fills the table; how many rows it holds."""
    connection = await asyncpg.connect(url, timeout=5)
    try:
        for statement in STATEMENTS:
            await connection.execute(statement)
        return int(await connection.fetchval("SELECT count(*) FROM walkthrough_accounts"))
    finally:
        await connection.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
