"""The Litestar application factory."""

from __future__ import annotations

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from entrypoints.container import ApiServices
from entrypoints.http.connections import ConnectionController
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.jobs import JobController
from entrypoints.http.ops import health, readyz, version

MAX_BODY_BYTES = 4 * 1024 * 1024


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
        signature_namespace={"ApiServices": ApiServices},
        logging_config=None,
    )
