"""The Litestar application factory."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Request
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import SerializationException
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig

from domain.identity import Identity
from entrypoints.http.auth import (
    OPEN,
    SECURITY_COMPONENTS,
    BearerAuthentication,
    HttpSecurity,
    provide_identity,
)
from entrypoints.http.connection_routes import ConnectionController
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.job_routes import JobController
from entrypoints.http.ops import health, readyz, version
from entrypoints.roles import ApiServices

MAX_BODY_BYTES = 4 * 1024 * 1024
JSON_MEDIA_TYPE = "application/json"


class JsonRequest(Request[Any, Any, Any]):
    """A request body is JSON sent as ``application/json`` (parameters such as ``charset`` are
    fine); any other type is a parse failure (400 FET-0001 "unable to parse request body"), as
    in the reference, so a web page cannot post a body without a CORS preflight. A body nested
    too deeply for the decoder is a parse failure too, not a RecursionError answered with 500."""

    async def json(self) -> Any:
        media_type, _ = self.content_type
        if media_type.lower() != JSON_MEDIA_TYPE:
            raise SerializationException("the request body is not application/json")
        try:
            return await super().json()
        except RecursionError:
            raise SerializationException("JSON body is nested too deeply") from None


def _cors(security: HttpSecurity) -> CORSConfig | None:
    if not security.cors_origins:
        return None
    return CORSConfig(
        allow_origins=list(security.cors_origins),
        allow_methods=["GET", "POST", "PATCH", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "X-Product-Name"],
    )


def create_app(services: ApiServices, security: HttpSecurity = OPEN) -> Litestar:
    """The API on ``services``. ``security`` says how callers are authenticated and
    authorised; the composition root decides it from the settings (``OPEN``, without
    authentication, only where that is allowed)."""

    async def provide_services() -> ApiServices:
        return services

    middleware = (
        [DefineMiddleware(BearerAuthentication, verifier=security.verifier)]
        if security.enabled
        else []
    )
    return Litestar(
        route_handlers=[JobController, ConnectionController, health, readyz, version],
        dependencies={
            "services": Provide(provide_services),
            "identity": Provide(provide_identity),
        },
        middleware=middleware,
        state=State({"security": security}),
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=OpenAPIConfig(
            title="Fetcher",
            version=services.version,
            path="/openapi",
            components=SECURITY_COMPONENTS,
        ),
        cors_config=_cors(security),
        request_max_body_size=MAX_BODY_BYTES,
        request_class=JsonRequest,
        signature_namespace={"ApiServices": ApiServices, "Identity": Identity},
        logging_config=None,
    )
