"""Streams datasource rows into one JSON document, sealed and uploaded as bytes flow.

``{"<config>": {"<table>": [ {row}, ... ]}}``: datasources in name order, tables in request
order, tables without rows absent (as the reference). The first datasource streams straight
into the sealed upload; the others, read at the same time, spool to anonymous temporary files
(unlinked at creation) and are appended in order once the first is done. Memory stays bounded
by the chunk and part sizes; the size limit is checked on every chunk, across all datasources.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import IO

from application.errors import DatasourceError
from application.jobs.extraction_plan import DatasourcePlan, ExtractionError, datasource_failure
from application.jobs.tasks import first_error
from application.ports.datasource_reader import DatasourceReader
from application.ports.result_sealer import ResultSealer, SealingStream
from application.ports.result_storage import ResultUpload

SPOOL_READ_SIZE = 1 << 20

Emit = Callable[[bytes], Awaitable[None]]


class ResultTooLarge(ExtractionError):
    def __init__(self) -> None:
        super().__init__("limit_exceeded", "extraction result exceeds the configured size limit")


@dataclass(frozen=True, slots=True)
class WrittenResult:
    size_bytes: int
    row_count: int
    hmac: str


@dataclass(slots=True)
class ResultProgress:
    """Rows and plaintext bytes written so far (across every datasource, spooled ones too);
    read while the job runs to report its progress."""

    rows: int = 0
    bytes: int = 0

    def reset(self) -> None:
        self.rows = self.bytes = 0


class _Budget:
    def __init__(self, max_bytes: int, progress: ResultProgress) -> None:
        self.max_bytes = max_bytes
        self.progress = progress

    def spend(self, n: int) -> None:
        self.progress.bytes += n
        if self.progress.bytes > self.max_bytes:
            raise ResultTooLarge()


class _SealedOutput:
    def __init__(self, stream: SealingStream, upload: ResultUpload, budget: _Budget) -> None:
        self._stream = stream
        self._upload = upload
        self._budget = budget

    async def write(self, data: bytes, *, counted: bool = False) -> None:
        if not counted:
            self._budget.spend(len(data))
        sealed = self._stream.update(data)
        if sealed:
            await self._upload.write(sealed)

    async def finish(self) -> None:
        await self._upload.write(self._stream.finish())


def _key(name: str) -> bytes:
    return json.dumps(name, ensure_ascii=False).encode("utf-8")


async def _stream_datasource(
    plan: DatasourcePlan, reader: DatasourceReader, emit: Emit, budget: _Budget
) -> None:
    """Writes ``{"t":[...],...}`` for one datasource through ``emit``."""
    await emit(b"{")
    current: str | None = None
    try:
        async for chunk in reader.stream(plan.endpoint, plan.prepared):
            if chunk.result_key != current:
                opener = b"],%s:[" if current is not None else b"%s:["
                await emit(opener % _key(chunk.result_key))
                current = chunk.result_key
            else:
                await emit(b",")
            await emit(chunk.data)
            budget.progress.rows += chunk.rows
    except DatasourceError as error:
        raise datasource_failure(error, "failed to query datasource") from error
    await emit(b"]}" if current is not None else b"}")


class _Spool:
    def __init__(self, budget: _Budget) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()
        self._budget = budget

    async def write(self, data: bytes) -> None:
        self._budget.spend(len(data))
        await asyncio.to_thread(self._file.write, data)

    async def copy_to(self, output: _SealedOutput) -> None:
        await asyncio.to_thread(self._file.seek, 0)
        while True:
            data = await asyncio.to_thread(self._file.read, SPOOL_READ_SIZE)
            if not data:
                return
            await output.write(data, counted=True)

    def close(self) -> None:
        self._file.close()


async def write_result(
    plans: Sequence[DatasourcePlan],
    reader: DatasourceReader,
    sealer: ResultSealer,
    upload: ResultUpload,
    max_bytes: int,
    parallelism: int = 4,
    progress: ResultProgress | None = None,
) -> WrittenResult:
    """Extracts every plan (fail-fast) into ``upload``. The caller commits or aborts it.
    ``progress`` is reset, then counts rows and bytes as they flow."""
    if progress is None:
        progress = ResultProgress()
    progress.reset()
    budget = _Budget(max_bytes, progress)
    stream = sealer.start()
    output = _SealedOutput(stream, upload, budget)
    ordered = sorted(plans, key=lambda p: p.config_name)
    spools = [_Spool(budget) for _ in ordered[1:]]
    gate = asyncio.Semaphore(parallelism)

    async def live() -> None:
        async with gate:
            await output.write(b"{" + _key(ordered[0].config_name) + b":")
            await _stream_datasource(ordered[0], reader, output.write, budget)

    async def spooled(plan: DatasourcePlan, spool: _Spool) -> None:
        async with gate:
            await _stream_datasource(plan, reader, spool.write, budget)

    try:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(live())
                for plan, spool in zip(ordered[1:], spools, strict=True):
                    group.create_task(spooled(plan, spool))
        except BaseExceptionGroup as group_error:
            raise first_error(group_error) from None
        for plan, spool in zip(ordered[1:], spools, strict=True):
            await output.write(b"," + _key(plan.config_name) + b":")
            await spool.copy_to(output)
        await output.write(b"}")
        await output.finish()
    finally:
        for spool in spools:
            spool.close()
    return WrittenResult(
        size_bytes=stream.plaintext_size, row_count=progress.rows, hmac=stream.hmac_hex
    )
