"""Reading an HTTP answer whole, up to a limit."""

from __future__ import annotations

import aiohttp


async def read_at_most(content: aiohttp.StreamReader, limit: int) -> bytes | None:
    """The whole body when it is at most ``limit`` bytes long, ``None`` when it is longer.

    ``StreamReader.read(n)`` answers with what has arrived so far, up to ``n`` bytes: a body
    split over several reads would be cut short and read as a different answer.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
