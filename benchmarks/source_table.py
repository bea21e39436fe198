"""The benchmark source table: the shape of the performance notes (bigint, text email,
numeric(18,2), timestamptz, boolean, text 30 % NULL, uuid)."""

from __future__ import annotations

import sys
from typing import Any


async def ensure_source_table(conn: Any, table: str, rows: int) -> None:
    """Creates ``table`` with ``rows`` rows on an asyncpg connection, unless it already has
    exactly that many."""
    if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table) and (
        await conn.fetchval(f"SELECT count(*) FROM {table}") == rows
    ):
        return
    print(f"creating {table} with {rows:,} rows ...", file=sys.stderr)
    await conn.execute(f"DROP TABLE IF EXISTS {table}")
    await conn.execute(
        f"""CREATE TABLE {table} (
            id bigint PRIMARY KEY, email text NOT NULL, amount numeric(18,2) NOT NULL,
            created_at timestamptz NOT NULL, active boolean NOT NULL, note text, ref uuid)"""
    )
    await conn.execute(
        f"""INSERT INTO {table}
        SELECT i, 'user' || i || '@example.com', round((random() * 100000)::numeric, 2),
               timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second',
               i % 2 = 0,
               CASE WHEN i % 10 < 3 THEN NULL ELSE 'note number ' || i END,
               gen_random_uuid()
        FROM generate_series(1, $1) AS i""",
        rows,
    )
    await conn.execute(f"VACUUM ANALYZE {table}")
