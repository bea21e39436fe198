"""A result upload that measures the time spent waiting on object storage."""

from __future__ import annotations

import time

from application.ports.result_storage import ResultUpload


class TimedUpload(ResultUpload):
    """Wraps ``upload``; ``seconds`` adds up the time its ``write`` and ``commit`` calls took
    (reading the datasources and sealing, between them, are not counted)."""

    __slots__ = ("_upload", "seconds")

    def __init__(self, upload: ResultUpload) -> None:
        self._upload = upload
        self.seconds = 0.0

    async def write(self, data: bytes) -> None:
        started = time.monotonic()
        try:
            await self._upload.write(data)
        finally:
            self.seconds += time.monotonic() - started

    async def commit(self) -> None:
        started = time.monotonic()
        try:
            await self._upload.commit()
        finally:
            self.seconds += time.monotonic() - started

    async def abort(self) -> None:
        await self._upload.abort()
