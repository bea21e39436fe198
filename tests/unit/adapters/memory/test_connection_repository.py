"""The connection repository contract on the in-memory twin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import UUID

import pytest

from adapters.memory.connection_repository import InMemoryConnectionRepository
from tests.contracts.connection_repository import (
    SECRET_NAMES,
    ConnectionRepositoryContract,
    Repository,
    SecretsAtRest,
)


class TestInMemoryConnectionRepository(ConnectionRepositoryContract):
    @pytest.fixture
    async def repo(self) -> AsyncIterator[Repository]:
        yield InMemoryConnectionRepository()

    @pytest.fixture
    def secrets_at_rest(self, repo: InMemoryConnectionRepository) -> SecretsAtRest:
        async def read(connection_id: UUID) -> dict[str, object]:
            stored = repo.stored(connection_id)
            assert stored is not None
            ssl = stored.ssl
            values = (stored.password, *((ssl.ca, ssl.cert, ssl.key) if ssl else (None,) * 3))
            return dict(zip(SECRET_NAMES, values, strict=True))

        return read
