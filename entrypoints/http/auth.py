"""Identity at the edge: the bearer-token middleware, the one list of open routes, and the
OpenAPI security scheme. Permissions per route: ``entrypoints.http.guards``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from litestar.connection import ASGIConnection
from litestar.middleware.authentication import (
    AbstractAuthenticationMiddleware,
    AuthenticationResult,
)
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ASGIApp

from application.errors import Unauthenticated
from application.ports.access_authorizer import AccessAuthorizer
from application.ports.token_verifier import TokenVerifier
from domain.identity import Identity

OPEN_ROUTES: Final = (
    "/health",
    "/readyz",
    "/readyz/tenant/{tenant_id}",
    "/version",
    "/metrics",
    "/openapi",
    "/openapi/*",
    "/console",
    "/console/*",
    "/console-assets/*",
)
"""The routes that answer without a token (liveness, readiness, version, metrics, the OpenAPI
document and its UI, the console's page and scripts: its data comes from ``/v1/console``).
Every other route requires one; ``{name}`` is one path segment, ``/*`` anything below."""


def _pattern(route: str) -> str:
    if route.endswith("/*"):
        return "^" + re.escape(route[:-2]) + "/.*$"
    parts = re.split(r"\{[^/}]+\}", route)
    return "^" + "[^/]+".join(re.escape(part) for part in parts) + "$"


OPEN_ROUTE_PATTERNS: Final = tuple(_pattern(route) for route in OPEN_ROUTES)


def is_open(path: str) -> bool:
    """Whether ``path`` (a concrete path or a route's path format) answers without a token."""
    return any(re.match(pattern, path) for pattern in OPEN_ROUTE_PATTERNS)


BEARER: Final = "BearerToken"
BEARER_REQUIREMENT: Final[list[dict[str, list[str]]]] = [{BEARER: []}]
"""The ``security`` of every route that is not open."""

SECURITY_COMPONENTS: Final = Components(
    security_schemes={
        BEARER: SecurityScheme(
            type="http",
            scheme="bearer",
            bearer_format="JWT",
            description=(
                "A JWT of the configured issuer, sent as `Authorization: Bearer <token>`. Its "
                "permissions claim grants `connections:post|get|patch|delete`, "
                "`fetcher:post|get` and `fetcher:history`. Not needed when the service runs "
                "without authentication (the embedded default on loopback)."
            ),
        )
    }
)


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """What the app needs to guard its routes: a token verifier and an authoriser when
    authentication is on (both or neither), and the origins CORS allows (none: CORS off)."""

    verifier: TokenVerifier | None = None
    authorizer: AccessAuthorizer | None = None
    cors_origins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.verifier is None) != (self.authorizer is None):
            raise ValueError("a token verifier and an authoriser go together")

    @property
    def enabled(self) -> bool:
        return self.verifier is not None


OPEN: Final = HttpSecurity()
"""No authentication, no CORS: the embedded default on loopback, and tests of other things."""


def bearer_token(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (a bare token without a
    scheme is accepted too, as the reference does). Another scheme, or nothing, is no token."""
    value = (header or "").strip()
    scheme, _, rest = value.partition(" ")
    if rest:
        token = rest.strip() if scheme.lower() == "bearer" else ""
    else:
        token = "" if scheme.lower() == "bearer" else scheme
    if not token:
        raise Unauthenticated()
    return token


class BearerAuthentication(AbstractAuthenticationMiddleware):
    """Verifies the bearer token of every request to a route that is not open and puts the
    caller's ``Identity`` on the connection (``request.user``; the token is ``request.auth``).
    Preflight ``OPTIONS`` requests pass, so CORS can answer them."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        super().__init__(app, exclude=list(OPEN_ROUTE_PATTERNS))
        self.verifier = verifier

    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        token = bearer_token(connection.headers.get("authorization"))
        return AuthenticationResult(user=await self.verifier.verify(token), auth=token)


async def provide_identity(request: ASGIConnection[Any, Identity, Any, Any]) -> Identity | None:
    """The caller, for handlers that take ``identity``; ``None`` when authentication is off."""
    return request.user if "user" in request.scope else None
