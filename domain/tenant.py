"""Tenants: whose connections, jobs, results and events a caller may see.

Single-tenant mode (the default) runs everything as the single tenant, whose id is empty: no
tenant segment in keys, ``single-tenant`` on events, as the reference. In multi-tenant mode
every request runs as the tenant its verified token names, and every use case and repository
takes that tenant, so what belongs to another tenant is out of reach below HTTP.

A tenant id becomes part of object keys, rate-limiter and cache keys, log fields and signed
message headers, so its form is restricted: 1 to 64 letters, digits, ``_`` or ``-``, starting
with a letter or a digit. ``single-tenant`` is reserved (events of single-tenant mode carry it).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from domain import error_catalogue as catalogue
from domain.errors import FetcherError, InvalidRequest

TENANT_ID_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
SINGLE_TENANT_LABEL: Final = "single-tenant"
"""How events and the reference name the tenant of single-tenant mode."""


def is_valid_tenant_id(value: str) -> bool:
    return bool(TENANT_ID_PATTERN.match(value)) and value != SINGLE_TENANT_LABEL


@dataclass(frozen=True, slots=True)
class Tenant:
    """One tenant; ``id`` is empty for the single tenant of single-tenant mode."""

    id: str

    def __post_init__(self) -> None:
        if self.id and not is_valid_tenant_id(self.id):
            raise ValueError("a tenant id is 1-64 letters, digits, '_' or '-'")

    @property
    def is_single(self) -> bool:
        return not self.id

    @property
    def label(self) -> str:
        """What events carry in ``ce-tenantid``, ``X-Tenant-ID`` and the signed tenant line."""
        return self.id or SINGLE_TENANT_LABEL

    @property
    def key_prefix(self) -> str:
        """The object-key segment of its results: ``<tenantId>/``, nothing when single."""
        return f"{self.id}/" if self.id else ""

    def __str__(self) -> str:
        return self.label


SINGLE_TENANT: Final = Tenant("")


@dataclass(frozen=True, slots=True)
class Tenancy:
    """How a deployment is tenanted: single-tenant (the default), or multi-tenant with an
    optional allow-list of the tenants it serves (None: any valid tenant id)."""

    multi_tenant: bool = False
    allowed: frozenset[str] | None = None

    @classmethod
    def multi(cls, allowed: Collection[str] | None = None) -> Tenancy:
        return cls(True, None if allowed is None else frozenset(allowed))

    def tenant_of(self, claimed: object) -> Tenant:
        """The tenant a request runs as, given its token's tenant claim: always the single
        tenant in single-tenant mode (the claim is ignored); in multi-tenant mode the claimed
        tenant, FET-1080 without a valid one, FET-1081 when it is not allowed."""
        if not self.multi_tenant:
            return SINGLE_TENANT
        if not isinstance(claimed, str) or not claimed:
            raise InvalidRequest(entry=catalogue.TENANT_REQUIRED)
        if not is_valid_tenant_id(claimed):
            raise InvalidRequest(entry=catalogue.INVALID_TENANT)
        if self.allowed is not None and claimed not in self.allowed:
            raise FetcherError(entry=catalogue.TENANT_NOT_FOUND)
        return Tenant(claimed)

    def serves(self, tenant_id: str) -> bool:
        """Whether ``tenant_id`` is a tenant of this multi-tenant deployment."""
        if not self.multi_tenant or not is_valid_tenant_id(tenant_id):
            return False
        return self.allowed is None or tenant_id in self.allowed


SINGLE_TENANCY: Final = Tenancy()
