"""The job event store contract on the in-memory twin, plain and interleaving."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.memory.job_event_store import InMemoryJobEventStore
from application.ports.job_event_store import JobEventStore
from tests.contracts.job_event_store import JobEventStoreContract


class TestInMemoryJobEventStore(JobEventStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[JobEventStore]:
        store = InMemoryJobEventStore()
        yield store
        await store.close()


class TestInterleavingInMemoryJobEventStore(JobEventStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[JobEventStore]:
        store = InMemoryJobEventStore(interleave=True)
        yield store
        await store.close()
