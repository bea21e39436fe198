"""The job index contract on the in-memory twin."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.memory.job_index import InMemoryJobIndex
from application.ports.job_index import JobIndex
from tests.contracts.job_index import JobIndexContract


class TestInMemoryJobIndex(JobIndexContract):
    @pytest.fixture
    async def index(self) -> AsyncIterator[JobIndex]:
        yield InMemoryJobIndex()
