from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from domain.schema import Schema
from domain.tenant import Tenant


@dataclass(frozen=True, slots=True)
class SchemaKey:
    """What a discovered schema depends on: the connection (of ``tenant``), its version and
    the scope."""

    connection_id: UUID
    version: int
    scope: tuple[str, ...]
    tenant: Tenant


class SchemaCache(Protocol):
    """Discovered schemas kept for a while (``SCHEMA_CACHE_TTL_SECONDS``), for validate-schema.

    - ``get`` returns None for a missing or expired entry; it never raises for a cache problem
      (a cache that cannot answer behaves as empty).
    - ``put`` stores a schema under its key; failures are swallowed (the caller already has the
      schema).
    - ``drop`` forgets every entry of a connection of ``tenant``, whatever its version and
      scope (called when a connection is changed or deleted). Since keys include the
      connection version, a changed connection is never served an old schema even before
      ``drop`` runs.
    - Schemas hold table and column names and types only, never credentials.
    """

    async def get(self, key: SchemaKey) -> Schema | None: ...

    async def put(self, key: SchemaKey, schema: Schema) -> None: ...

    async def drop(self, connection_id: UUID, *, tenant: Tenant) -> None: ...
