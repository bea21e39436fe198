"""The permission each route needs (reference §2.1), checked by one guard.

A route that is not open names its permission in its handler's ``opt`` (Litestar's way of
giving a guard per-route data): ``@get(..., opt=needs(Permission.FETCHER_GET))``. The
controllers that hold such routes are ``GuardedController``s: they carry
``requires_permission``, which asks the configured authoriser (the token's permissions claim,
or the authorization service in plugin mode; with authentication off it lets everything
through), and document the bearer token.
"""

from __future__ import annotations

from typing import Any, Final

from litestar import Controller
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from domain.identity import Permission
from entrypoints.http.auth import BEARER_REQUIREMENT, HttpSecurity

PERMISSION: Final = "permission"
"""The key of a handler's ``opt`` that holds the permission its route needs."""


def needs(permission: Permission) -> dict[str, Any]:
    """A handler's ``opt`` for a route that needs ``permission``."""
    return {PERMISSION: permission}


def permission_of(handler: BaseRouteHandler) -> Permission | None:
    """The permission ``handler``'s route needs (``None``: it names none)."""
    permission = handler.opt.get(PERMISSION)
    return permission if isinstance(permission, Permission) else None


async def requires_permission(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """The guard of every route that is not open: the caller must hold the permission the
    handler names. A guarded handler that names none is a wiring mistake, refused (fails
    closed) rather than served open."""
    permission = permission_of(handler)
    if permission is None:
        raise RuntimeError(f"the route {handler} is guarded but names no permission")
    security: HttpSecurity = connection.app.state.security
    if security.authorizer is None:
        return
    await security.authorizer.authorize(connection.user, permission, connection.auth)


class GuardedController(Controller):
    """A controller of routes that are not open: each needs a bearer token and the permission
    its handler names."""

    security = BEARER_REQUIREMENT
    guards = [requires_permission]
