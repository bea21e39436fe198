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
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig

from adapters.telemetry.otel_tracer import OpenTelemetryTracer
from domain.identity import Identity
from domain.tenant import Tenant
from entrypoints.console.routes import CONSOLE_ROUTES, TEMPLATES
from entrypoints.http.api_examples import complete
from entrypoints.http.audit_routes import AuditController
from entrypoints.http.auth import (
    SECURITY_COMPONENTS,
    BearerAuthentication,
    HttpSecurity,
    provide_identity,
)
from entrypoints.http.connection_routes import ConnectionController
from entrypoints.http.errors import EXCEPTION_HANDLERS
from entrypoints.http.job_routes import JobController
from entrypoints.http.openapi import OfflineSwaggerUI, RequiredFieldsSchemaPlugin
from entrypoints.http.ops import PROBE_ROUTES, self_probe, version
from entrypoints.http.request_context import QUIET_PATHS, STATE_KEY, RequestContext, route_name
from entrypoints.http.tenancy import provide_tenant
from entrypoints.roles import ApiServices, Probes

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
        allow_headers=["Authorization", "Content-Type", "X-Product-Name", "X-Request-Id"],
        expose_headers=["X-Request-Id"],
    )


def _tracing_plugins(services: ApiServices) -> list[Any]:
    """Litestar's OpenTelemetry plugin, when the process traces: a server span per request
    (probes and scrapes left out), a child of the caller's ``traceparent`` if it sent one."""
    if not isinstance(services.tracer, OpenTelemetryTracer):
        return []
    from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin

    def tag_request(span: Any, scope: dict[str, Any]) -> None:
        request_id = (scope.get("state") or {}).get(STATE_KEY)
        if request_id:
            span.set_attribute("fetcher.request_id", request_id)

    config = OpenTelemetryConfig(
        tracer_provider=services.tracer.provider,
        scope_span_details_extractor=lambda scope: (route_name(scope), {}),
        server_request_hook_handler=tag_request,
        exclude=[QUIET_PATHS.pattern],
    )
    return [OpenTelemetryPlugin(config)]


def _console_templates() -> TemplateConfig[JinjaTemplateEngine]:
    """The console's templates, every value escaped (``autoescape``): metadata, config names
    and error texts come from requests."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))


def create_app(services: ApiServices, security: HttpSecurity | None = None) -> Litestar:
    """The API on ``services``. ``security`` says how callers are authenticated and
    authorised: by default the services' own, which the composition decides from the
    settings (``OPEN``, without authentication, only where that is allowed)."""
    if security is None:
        security = services.security

    async def provide_services() -> ApiServices:
        return services

    async def provide_probes() -> Probes:
        return services.probes

    middleware = (
        [DefineMiddleware(BearerAuthentication, verifier=security.verifier)]
        if security.enabled
        else []
    )
    app = Litestar(
        route_handlers=[
            JobController,
            ConnectionController,
            AuditController,
            *PROBE_ROUTES,
            version,
            *CONSOLE_ROUTES,
        ],
        dependencies={
            "services": Provide(provide_services),
            "probes": Provide(provide_probes),
            "identity": Provide(provide_identity),
            "tenant": Provide(provide_tenant),
        },
        middleware=middleware,
        state=State({"security": security}),
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=OpenAPIConfig(
            title="Fetcher",
            version=services.version,
            path="/openapi",
            components=SECURITY_COMPONENTS,
            render_plugins=[OfflineSwaggerUI()],
        ),
        cors_config=_cors(security),
        request_max_body_size=MAX_BODY_BYTES,
        lifespan=[self_probe(services.probes)],
        request_class=JsonRequest,
        template_config=_console_templates(),
        signature_namespace={
            "ApiServices": ApiServices,
            "Identity": Identity,
            "Probes": Probes,
            "Tenant": Tenant,
        },
        logging_config=None,
        plugins=[RequiredFieldsSchemaPlugin(), *_tracing_plugins(services)],
    )
    # The document's descriptions, examples and extra statuses, applied once to the document
    # the handlers generate (it is cached: the JSON and the UI serve this one).
    complete(app.openapi_schema)
    # Outermost, around what Litestar built (its router, exception handling, CORS and
    # tracing), so that every request gets an id and an access-log line, 404s included.
    app.asgi_handler = RequestContext(app.asgi_handler)
    return app
