"""Tenants at the edge: the caller's tenant for the routes (``/readyz/tenant/{id}`` is with the
other probes, in ``ops.py``).

Single-tenant mode runs every request as the single tenant. Multi-tenant mode runs it as the
tenant its verified token names (FET-1080 without a valid one, FET-1081 outside the
allow-list); each route hands that tenant to its use case, which is where isolation holds.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.di import NamedDependency

from domain.tenant import Tenant
from entrypoints.roles import ApiServices


async def provide_tenant(
    request: ASGIConnection[Any, Any, Any, Any], services: NamedDependency[ApiServices]
) -> Tenant:
    """The tenant the request runs as (after authentication and the route's guard)."""
    identity = request.user if "user" in request.scope else None
    return services.tenancy.tenant_of(identity.tenant if identity is not None else None)
