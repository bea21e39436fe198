"""Connection routes (reference §2.4.1-2.4.10): thin — decode, call one use case with the
caller's tenant, encode."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody

from application.connections.queries.connection_schema import ConnectionSchema
from application.connections.queries.list_connections import ListFilter
from application.connections.queries.validate_schema import SchemaIssue
from application.ports.connection_repository import ConnectionPage
from application.timefmt import rfc3339nano
from domain import error_catalogue as catalogue
from domain import gojson
from domain.connection import Connection, normalise_product
from domain.connection_input import ConnectionInput
from domain.errors import InvalidRequest
from domain.identity import Permission
from domain.tenant import Tenant
from entrypoints.http.body_errors import PREFIX as UNPARSABLE
from entrypoints.http.body_errors import port_shown
from entrypoints.http.errors import error_responses, status_of
from entrypoints.http.guards import GuardedController, needs
from entrypoints.http.job_routes import go_json, parse_id
from entrypoints.http.list_params import parse_list_filter
from entrypoints.http.openapi import (
    LIST_DESCRIPTION,
    LIST_PARAMETERS,
    PRODUCT_FILTER,
    PRODUCT_REQUIRED,
    documented_with,
)
from entrypoints.http.schemas import (
    ConnectionBody,
    ConnectionList,
    ConnectionSchemaView,
    ConnectionTestView,
    ConnectionView,
    NewConnection,
    SchemaColumnView,
    SchemaInvalid,
    SchemaIssueView,
    SchemaTableView,
    SchemaValid,
    SslView,
    ValidateSchemaRequest,
)
from entrypoints.roles import ApiServices

ZERO_TIME = "0001-01-01T00:00:00Z"
_SCHEMA_INVALID = catalogue.SCHEMA_VALIDATION_FAILED


def connection_view(connection: Connection) -> ConnectionView:
    ssl = connection.ssl
    return ConnectionView(
        id=str(connection.id),
        productName=connection.product_name or None,
        configName=connection.config_name,
        type=connection.type.value,
        host=connection.host,
        port=connection.port,
        databaseName=connection.database_name,
        schema=connection.schema or None,
        userName=connection.user_name,
        ssl=SslView(mode=ssl.mode) if ssl and ssl.mode else None,
        metadata=go_json(gojson.encode(connection.metadata)) if connection.metadata else None,
        createdAt=rfc3339nano(connection.created_at) if connection.created_at else ZERO_TIME,
        updatedAt=rfc3339nano(connection.updated_at) if connection.updated_at else ZERO_TIME,
    )


def _list_filter(
    request: Request[Any, Any, Any], services: ApiServices, *, product: str | None
) -> ListFilter:
    """The page of a list the query asks for, within the service's page limit."""
    return parse_list_filter(
        request.query_params.multi_items(),
        product=product,
        max_limit=services.connections.max_page_limit,
    )


def _page(result: ConnectionPage, wanted: ListFilter) -> ConnectionList:
    return ConnectionList(
        items=[connection_view(c) for c in result.items],
        page=wanted.page,
        limit=wanted.limit,
        total=result.total,
    )


def _schema_view(found: ConnectionSchema) -> ConnectionSchemaView:
    connection = found.connection
    return ConnectionSchemaView(
        id=str(connection.id),
        configName=connection.config_name,
        databaseName=connection.database_name,
        type=connection.type.value,
        tables=[
            SchemaTableView(
                name=table.name,
                fields=[c.name for c in table.columns],
                columns=[SchemaColumnView(name=c.name, type=c.data_type) for c in table.columns],
            )
            for table in found.tables
        ],
    )


def _issue_view(issue: SchemaIssue) -> SchemaIssueView:
    return SchemaIssueView(
        type=issue.type.value, dataSourceId=issue.data_source, table=issue.table, field=issue.field
    )


def _product(request: Request[Any, Any, Any], *, required: bool) -> str | None:
    return normalise_product(request.headers.get("x-product-name"), required=required)


async def _sent_connection(
    request: Request[Any, Any, Any], data: ConnectionBody
) -> ConnectionInput:
    """The connection as sent. ``port`` must be a JSON integer: the reference decodes it into
    an int, so text (``"5432"``) or a number written with a fraction or an exponent
    (``5432.0``) does not parse there (FET-0001 ``unable to parse request body``), where the
    body decoder here would convert it."""
    document = await request.json()
    port = document.get("port") if isinstance(document, dict) else None
    if port is not None and type(port) is not int:
        problem = f"expected an integer, got {port_shown(port)}"
        raise InvalidRequest(
            f"{UNPARSABLE}: port: {problem}",
            entry=catalogue.UNPARSABLE_BODY,
            fields={"port": problem},
        )
    return data.to_input()


class ConnectionController(GuardedController):
    path = "/v1/management/connections"
    tags = ["connections"]

    @post(
        "/",
        opt=needs(Permission.CONNECTIONS_POST),
        status_code=201,
        summary="Register a connection",
        responses=error_responses(400, 409, 413),
        operation_class=documented_with(PRODUCT_REQUIRED),
    )
    async def create(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
        data: JSONBody[NewConnection],
    ) -> ConnectionView:
        product = _product(request, required=True) or ""
        sent = await _sent_connection(request, data)
        if data.is_blank:
            raise InvalidRequest(entry=catalogue.EMPTY_BODY)
        connection = await services.connections.register(product, sent, tenant=tenant)
        return connection_view(connection)

    @get(
        "/",
        opt=needs(Permission.CONNECTIONS_GET),
        summary="List connections (internal datasources first on page 1)",
        description=LIST_DESCRIPTION,
        responses=error_responses(400),
        operation_class=documented_with(PRODUCT_FILTER, *LIST_PARAMETERS),
    )
    async def list_connections(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
    ) -> ConnectionList:
        wanted = _list_filter(request, services, product=_product(request, required=False))
        return _page(await services.connections.list(wanted, tenant=tenant), wanted)

    @get(
        "/unassigned",
        opt=needs(Permission.CONNECTIONS_GET),
        summary="List connections without a product",
        description=LIST_DESCRIPTION,
        responses=error_responses(400),
        operation_class=documented_with(*LIST_PARAMETERS),
    )
    async def list_unassigned(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
    ) -> ConnectionList:
        wanted = _list_filter(request, services, product=None)
        return _page(await services.connections.list_unassigned(wanted, tenant=tenant), wanted)

    @post(
        "/validate-schema",
        opt=needs(Permission.CONNECTIONS_POST),
        status_code=200,
        summary="Check that datasources, tables and fields exist",
        description=(
            f"200 when everything exists, 422 ({_SCHEMA_INVALID.code}) with the list of issues."
        ),
        responses={
            **error_responses(400, 413),
            status_of(_SCHEMA_INVALID): ResponseSpec(
                data_container=SchemaInvalid,
                description=f"{_SCHEMA_INVALID.title} ({_SCHEMA_INVALID.code})",
                generate_examples=False,
            ),
        },
    )
    async def validate_schema(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        data: JSONBody[ValidateSchemaRequest],
    ) -> Response[SchemaValid | SchemaInvalid]:
        issues = await services.connections.validate_schema(data.mappedFields, tenant=tenant)
        if not issues:
            return Response(
                SchemaValid(
                    status="success",
                    message=(
                        "Schema validated successfully. All datasources, tables, and fields exist."
                    ),
                )
            )
        return Response(
            SchemaInvalid(
                title=_SCHEMA_INVALID.title,
                code=_SCHEMA_INVALID.code,
                message=_SCHEMA_INVALID.message,
                errors=[_issue_view(issue) for issue in issues],
            ),
            status_code=status_of(_SCHEMA_INVALID),
        )

    @get(
        "/{connection_id:str}",
        opt=needs(Permission.CONNECTIONS_GET),
        summary="Read a connection",
        responses=error_responses(400, 404),
    )
    async def read(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
    ) -> ConnectionView:
        found = await services.connections.get(parse_id(connection_id, "connection"), tenant=tenant)
        return connection_view(found)

    @patch(
        "/{connection_id:str}",
        opt=needs(Permission.CONNECTIONS_PATCH),
        summary="Change a connection (partial update)",
        responses=error_responses(400, 404, 409, 413),
    )
    async def update(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
        request: Request[Any, Any, Any],
        data: JSONBody[ConnectionBody],
    ) -> ConnectionView:
        identifier = parse_id(connection_id, "connection")
        changed = await services.connections.update(
            identifier, await _sent_connection(request, data), tenant=tenant
        )
        return connection_view(changed)

    @delete(
        "/{connection_id:str}",
        opt=needs(Permission.CONNECTIONS_DELETE),
        status_code=204,
        summary="Delete a connection (soft)",
        responses=error_responses(400, 404, 409),
    )
    async def remove(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
    ) -> None:
        await services.connections.remove(parse_id(connection_id, "connection"), tenant=tenant)

    @post(
        "/{connection_id:str}/test",
        opt=needs(Permission.CONNECTIONS_POST),
        status_code=200,
        summary="Dial a connection",
        responses=error_responses(400, 404, 429),
    )
    async def check(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
    ) -> ConnectionTestView:
        result = await services.connections.check(
            parse_id(connection_id, "connection"), tenant=tenant
        )
        return ConnectionTestView(
            status="success", message="Connection successful", latencyMs=result.latency_ms
        )

    @get(
        "/{connection_id:str}/schema",
        opt=needs(Permission.CONNECTIONS_GET),
        summary="Discover a connection's tables now",
        responses=error_responses(400, 404),
    )
    async def schema(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
    ) -> ConnectionSchemaView:
        found = await services.connections.schema(
            parse_id(connection_id, "connection"), tenant=tenant
        )
        return _schema_view(found)

    @post(
        "/{connection_id:str}/assign",
        opt=needs(Permission.CONNECTIONS_POST),
        status_code=200,
        summary="Give a connection a product",
        responses=error_responses(400, 404, 409),
        operation_class=documented_with(PRODUCT_REQUIRED),
    )
    async def assign(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
        connection_id: FromPath[str],
    ) -> ConnectionView:
        product = _product(request, required=True) or ""
        identifier = parse_id(connection_id, "connection")
        assigned = await services.connections.assign(identifier, product, tenant=tenant)
        return connection_view(assigned)
