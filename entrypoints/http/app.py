"""The Litestar application factory."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Request
from litestar.config.cors import CORSConfig
from litestar.di import Provide
from litestar.exceptions import SerializationException
from litestar.openapi import OpenAPIConfig

from entrypoints.http.connections import ConnectionController
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.jobs import JobController
from entrypoints.http.ops import health, readyz, version
from entrypoints.roles import ApiServices

MAX_BODY_BYTES = 4 * 1024 * 1024


class JsonRequest(Request[Any, Any, Any]):
    """A request whose JSON body nested too deeply for the decoder is a parse failure (400
    FET-0001 "unable to parse request body"), not a RecursionError answered with a 500."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError:
            raise SerializationException("JSON body is nested too deeply") from None


def create_app(services: ApiServices) -> Litestar:
    async def provide_services() -> ApiServices:
        return services

    return Litestar(
        route_handlers=[JobController, ConnectionController, health, readyz, version],
        dependencies={"services": Provide(provide_services)},
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        openapi_config=OpenAPIConfig(title="Fetcher", version=services.version, path="/openapi"),
        cors_config=CORSConfig(),
        request_max_body_size=MAX_BODY_BYTES,
        request_class=JsonRequest,
        signature_namespace={"ApiServices": ApiServices},
        logging_config=None,
    )
