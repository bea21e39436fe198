from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from uuid import UUID

from domain.connection import Connection
from domain.tenant import Tenant


@dataclass(frozen=True, slots=True)
class ConnectionPage:
    items: list[Connection]
    total: int


@dataclass(frozen=True, slots=True)
class ConnectionQuery:
    """One page of stored connections, newest first unless ``descending`` is False.

    ``created_from`` and ``created_to`` bound ``created_at`` inclusively; ``metadata`` keeps
    connections whose metadata value at each key equals the given string; ``unassigned``
    keeps only connections without a product (``product_name`` is then ignored).
    """

    page: int = 1
    limit: int = 10
    descending: bool = True
    product_name: str | None = None
    type: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    unassigned: bool = False


class ConnectionRepository(Protocol):
    """Stored (external) connections, each of one tenant. Soft-deleted ones are invisible to
    every read.

    - Every read and write is within one tenant: ``tenant`` (the single tenant by default) or,
      for ``add`` and ``update``, ``connection.tenant``. Another tenant's connection is as
      invisible as a missing one; a tenant is never changed once stored.
    - ``add`` raises ``domain.errors.EntityConflict`` (FET-1002) when a non-deleted connection
      of the same tenant already has the config name.
    - ``update`` writes every field but ``created_at`` and the tenant when the stored version
      is ``connection.version - 1`` (optimistic lock). It raises ``EntityNotFound`` when the
      tenant has no live connection with that id, ``ConcurrencyConflict`` when another change
      came first, and ``EntityConflict`` (FET-1002) when the new config name is taken.
    - ``assign_product`` gives an unowned live connection to a product in one conditional
      write (exactly one of several concurrent callers wins) and bumps its version; it returns
      None when the connection is missing, deleted or already owned.
    - ``soft_delete`` bumps the version too, so caches keyed by version never serve it again,
      and erases the sealed credentials (password, SSL CA, certificate and key) it kept.
    - Credentials are stored only as ``SealedSecret`` values; the repository never sees plaintext.
    - Unavailability raises ``domain.errors.Unavailable``.
    """

    async def add(self, connection: Connection) -> None: ...

    async def get(self, connection_id: UUID, *, tenant: Tenant) -> Connection | None: ...

    async def by_config_names(
        self, names: Sequence[str], *, tenant: Tenant
    ) -> dict[str, Connection]: ...

    async def list(self, query: ConnectionQuery, *, tenant: Tenant) -> ConnectionPage: ...

    async def update(self, connection: Connection) -> Connection: ...

    async def assign_product(
        self, connection_id: UUID, product: str, now: datetime, *, tenant: Tenant
    ) -> Connection | None: ...

    async def soft_delete(self, connection_id: UUID, now: datetime, *, tenant: Tenant) -> bool:
        """Returns False when the tenant had no live connection with that id."""
        ...

    async def check(self) -> None: ...
