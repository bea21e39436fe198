"""The caller's identity and permissions, read from a token's claims."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from application.errors import PermissionDenied
from application.ports.access_authorizer import AccessAuthorizer
from domain.identity import Identity, Permission


@dataclass(frozen=True, slots=True)
class ClaimNames:
    """Where the permissions and the tenant are in a token: a claim name or a dotted path into
    nested claims (``realm_access.roles``). A claim whose own name has dots (``https://x/roles``)
    is found by that name first."""

    permissions: str = "scope"
    tenant: str = "tenantId"


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def permissions_in(value: Any) -> frozenset[str]:
    """A space-separated string (OAuth ``scope``) or a list of strings (roles); anything else
    grants nothing."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list | tuple):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def identity_from_claims(claims: Mapping[str, Any], names: ClaimNames) -> Identity:
    subject = claims.get("sub")
    tenant = claim_at(claims, names.tenant)
    return Identity(
        subject=subject if isinstance(subject, str) else "",
        permissions=permissions_in(claim_at(claims, names.permissions)),
        tenant=tenant if isinstance(tenant, str) and tenant else None,
        claims=dict(claims),
    )


class ClaimPermissions(AccessAuthorizer):
    """Allows what the token's permissions claim grants (``fetcher:get`` also grants the job
    history, see ``domain.identity``)."""

    async def authorize(self, identity: Identity, permission: Permission, token: str) -> None:
        if not identity.allows(permission):
            raise PermissionDenied(permission.value)
