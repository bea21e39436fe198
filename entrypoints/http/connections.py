"""Connection routes (create, list, read, delete)."""

from __future__ import annotations

from litestar import Controller, Request, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from application.commands.manage_connections import ConnectionInput
from application.ports.connection_repository import ConnectionQuery
from application.timefmt import rfc3339nano
from domain.connection import Connection, normalise_product
from domain.errors import InvalidRequest
from entrypoints.container import ApiServices
from entrypoints.http.jobs import parse_id
from entrypoints.http.schemas import ConnectionCreate, ConnectionList, ConnectionView, SslView

MAX_LIMIT = 100


def connection_view(connection: Connection) -> ConnectionView:
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
        ssl=SslView(mode=connection.ssl.mode) if connection.ssl and connection.ssl.mode else None,
        metadata=dict(connection.metadata) or None,
        createdAt=rfc3339nano(connection.created_at)
        if connection.created_at
        else "0001-01-01T00:00:00Z",
        updatedAt=rfc3339nano(connection.updated_at)
        if connection.updated_at
        else "0001-01-01T00:00:00Z",
    )


def _query_int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidRequest(
            "One or more query parameters are in an incorrect format. Please check the following "
            f"parameters '{name}' and ensure they meet the required format before trying again.",
            code="FET-0405",
            title="Invalid Query Parameter",
        )
    return value


class ConnectionController(Controller):
    path = "/v1/management/connections"
    tags = ["connections"]

    @post("/", status_code=201, summary="Register a connection")
    async def create(
        self,
        services: NamedDependency[ApiServices],
        request: Request,
        data: JSONBody[ConnectionCreate],
    ) -> ConnectionView:
        product = normalise_product(request.headers.get("x-product-name"), required=True)
        assert product is not None
        if all(getattr(data, f) in (None, "", {}) for f in data.__struct_fields__):
            raise InvalidRequest("empty request body", code="FET-0001", title="Invalid payload")
        ssl = data.ssl
        has_ssl = ssl is not None and any((ssl.mode, ssl.ca, ssl.cert, ssl.key))
        connection = await services.register_connection(
            product,
            ConnectionInput(
                config_name=data.configName or "",
                type=data.type or "",
                host=data.host or "",
                port=data.port or 0,
                database_name=data.databaseName or "",
                user_name=data.userName or "",
                password=data.password or "",
                schema=data.schema,
                ssl_mode=(ssl.mode or "") if has_ssl and ssl else None,
                ssl_ca=ssl.ca if has_ssl and ssl else None,
                ssl_cert=ssl.cert if has_ssl and ssl else None,
                ssl_key=ssl.key if has_ssl and ssl else None,
                metadata=data.metadata,
            ),
        )
        return connection_view(connection)

    @get("/", summary="List connections")
    async def list_connections(
        self, services: NamedDependency[ApiServices], request: Request
    ) -> ConnectionList:
        product = normalise_product(request.headers.get("x-product-name"), required=False)
        limit = _query_int(request, "limit", 10)
        if limit > MAX_LIMIT:
            raise InvalidRequest(
                f"The pagination limit exceeds the maximum allowed of {MAX_LIMIT} items per page. "
                "Please verify the limit and try again.",
                code="FET-0406",
                title="Pagination Limit Exceeded",
            )
        page = _query_int(request, "page", 1)
        order = (request.query_params.get("sortOrder") or "desc").lower()
        if order not in ("asc", "desc"):
            raise InvalidRequest(
                "The 'sort_order' field must be 'asc' or 'desc'. Please provide a valid sort order "
                "and try again.",
                code="FET-0407",
                title="Invalid Sort Order",
            )
        kind = (request.query_params.get("type") or "").upper() or None
        result = await services.list_connections(
            ConnectionQuery(
                page=page, limit=limit, descending=order == "desc", product_name=product, type=kind
            )
        )
        return ConnectionList(
            items=[connection_view(c) for c in result.items],
            page=page,
            limit=limit,
            total=result.total,
        )

    @get("/{connection_id:str}", summary="Read a connection")
    async def read(
        self, services: NamedDependency[ApiServices], connection_id: FromPath[str]
    ) -> ConnectionView:
        return connection_view(await services.get_connection(parse_id(connection_id, "connection")))

    @delete("/{connection_id:str}", status_code=204, summary="Delete a connection (soft)")
    async def remove(
        self, services: NamedDependency[ApiServices], connection_id: FromPath[str]
    ) -> None:
        await services.remove_connection(parse_id(connection_id, "connection"))
