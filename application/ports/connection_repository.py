from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from domain.connection import Connection


@dataclass(frozen=True, slots=True)
class ConnectionPage:
    items: list[Connection]
    total: int


@dataclass(frozen=True, slots=True)
class ConnectionQuery:
    page: int = 1
    limit: int = 10
    descending: bool = True
    product_name: str | None = None
    type: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None


class ConnectionRepository(Protocol):
    """Stored (external) connections. Soft-deleted ones are invisible to every read.

    - ``add`` raises ``domain.errors.Conflict`` with code FET-1002 when a non-deleted connection
      already has the config name.
    - Credentials are stored only as ``SealedSecret`` values; the repository never sees plaintext.
    - Unavailability raises ``domain.errors.Unavailable``.
    """

    async def add(self, connection: Connection) -> None: ...

    async def get(self, connection_id: UUID) -> Connection | None: ...

    async def by_config_names(self, names: Sequence[str]) -> dict[str, Connection]: ...

    async def list(self, query: ConnectionQuery) -> ConnectionPage: ...

    async def soft_delete(self, connection_id: UUID, now: datetime) -> bool:
        """Returns False when there was no live connection with that id."""
        ...

    async def check(self) -> None: ...
