"""AssignConnection: give an unowned connection to a product, once (reference §2.4.10)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from uuid import UUID

from application.connections.credential_rotation import needs_reseal, reseal
from application.ports.clock import Clock
from application.ports.connection_repository import ConnectionRepository
from application.ports.credential_cipher import CredentialCipher
from domain import error_catalogue as catalogue
from domain.connection import Connection
from domain.errors import ConcurrencyConflict, Conflict, EntityNotFound
from domain.tenant import Tenant

log = logging.getLogger(__name__)


class AlreadyAssigned(Conflict):
    entry = catalogue.CONNECTION_ALREADY_ASSIGNED

    def __init__(self) -> None:
        super().__init__(self.entry.render(entity="connection"))


@dataclass(slots=True)
class AssignConnection:
    """Sets the product of a connection of ``tenant`` that has none, in one conditional write:
    of several concurrent calls exactly one wins; the others get 409 FET-1015, as does any
    later call. 404 FET-1001 when the tenant has no such stored connection. Being a write, it
    also seals again any secret still under an older key version (best effort: a concurrent
    change wins)."""

    repository: ConnectionRepository
    cipher: CredentialCipher
    clock: Clock

    async def __call__(self, connection_id: UUID, product: str, *, tenant: Tenant) -> Connection:
        assigned = await self.repository.assign_product(
            connection_id, product, self.clock.now(), tenant=tenant
        )
        if assigned is None:
            if await self.repository.get(connection_id, tenant=tenant) is None:
                raise EntityNotFound("connection")
            raise AlreadyAssigned()
        if not needs_reseal(assigned, self.cipher.current_version):
            return assigned
        resealed = reseal(assigned, self.cipher)
        if resealed == assigned:
            return assigned
        try:
            return await self.repository.update(
                replace(resealed, version=assigned.version + 1, updated_at=self.clock.now())
            )
        except (ConcurrencyConflict, EntityNotFound):
            log.info("connection %s changed while its secrets were sealed again", connection_id)
            return assigned
