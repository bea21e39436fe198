"""Audit routes: the signed checkpoints of the event log (read-only job history permission)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from domain.audit_chain import Checkpoint
from domain.identity import Permission
from domain.tenant import Tenant
from entrypoints.http.errors import error_responses
from entrypoints.http.guards import GuardedController, needs
from entrypoints.http.list_params import invalid_parameter
from entrypoints.http.schemas import AuditCheckpoints, AuditCheckpointView
from entrypoints.roles import ApiServices


def checkpoint_view(checkpoint: Checkpoint) -> AuditCheckpointView:
    """The checkpoint's own JSON form (what it signs, its signature, its heads when shown),
    in the API's camelCase."""
    doc = checkpoint.to_json()
    return msgspec.convert({_camel(key): value for key, value in doc.items()}, AuditCheckpointView)


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _count(raw: str | None, name: str, default: int, minimum: int) -> int:
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < minimum:
        raise invalid_parameter(name)
    return int(raw)


class AuditController(GuardedController):
    path = "/v1/audit"
    tags = ["audit"]

    @get(
        "/checkpoints",
        opt=needs(Permission.FETCHER_HISTORY),
        summary="Signed checkpoints of the event log, ascending from `after`",
        description="Each checkpoint signs (Ed25519) the log's position, record count and "
        "running hash, and the SHA-256 of the heads of the jobs recorded since the previous "
        "one. `fetcher keys audit-public` prints the public key; `fetcher audit verify` "
        "checks them. In multi-tenant mode the heads (other tenants' job ids) are left out. "
        "`limit`: 20 by default, at most 100.",
        responses=error_responses(400),
    )
    async def list_checkpoints(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        after: Annotated[str | None, QueryParameter(name="after", required=False)] = None,
        limit: Annotated[str | None, QueryParameter(name="limit", required=False)] = None,
    ) -> AuditCheckpoints:
        del tenant  # resolved for its checks: a request without a valid tenant is refused
        if services.list_checkpoints is None:
            return AuditCheckpoints(checkpoints=[])
        found = await services.list_checkpoints(
            after=_count(after, "after", 0, 0),
            limit=_count(limit, "limit", 20, 1),
            with_heads=not services.tenancy.multi_tenant,
        )
        return AuditCheckpoints(checkpoints=[checkpoint_view(c) for c in found])
