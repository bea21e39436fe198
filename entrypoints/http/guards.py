"""One guard per resource and action (reference §2.1): each route that is not open names the
one it needs. A guard asks the configured authoriser (the token's permissions claim, or the
authorization service in plugin mode); with authentication off it lets everything through."""

from __future__ import annotations

from typing import Any, Final

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from domain.identity import Permission
from entrypoints.http.auth import HttpSecurity

Connection = ASGIConnection[Any, Any, Any, Any]


async def _require(connection: Connection, permission: Permission) -> None:
    security: HttpSecurity = connection.app.state.security
    if security.authorizer is None:
        return
    await security.authorizer.authorize(connection.user, permission, connection.auth)


async def can_post_connections(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.CONNECTIONS_POST)


async def can_get_connections(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.CONNECTIONS_GET)


async def can_patch_connections(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.CONNECTIONS_PATCH)


async def can_delete_connections(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.CONNECTIONS_DELETE)


async def can_post_fetcher(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.FETCHER_POST)


async def can_get_fetcher(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.FETCHER_GET)


async def can_read_history(connection: Connection, _: BaseRouteHandler) -> None:
    await _require(connection, Permission.FETCHER_HISTORY)


PERMISSION_OF_GUARD: Final = {
    can_post_connections: Permission.CONNECTIONS_POST,
    can_get_connections: Permission.CONNECTIONS_GET,
    can_patch_connections: Permission.CONNECTIONS_PATCH,
    can_delete_connections: Permission.CONNECTIONS_DELETE,
    can_post_fetcher: Permission.FETCHER_POST,
    can_get_fetcher: Permission.FETCHER_GET,
    can_read_history: Permission.FETCHER_HISTORY,
}
"""Every guard with the permission it requires."""
