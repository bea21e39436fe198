"""The OpenAPI document beyond what handler signatures say, and its UI served offline.

Handlers read the product header and the list parameters themselves (to answer with the
reference's codes), and decode bodies leniently (a missing field is FET-0402 naming it, not
a decoding error); so those are declared here, for the document only: the header and query
parameters through ``documented_with``, the required body fields through ``RequiredFields``.

The UI is Swagger UI from the ``swagger-ui-bundle-v2`` package, its files served by the
service under ``/openapi/assets``: the page needs nothing from the internet.
"""

from __future__ import annotations

import html
import json
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import msgspec
from litestar import Request, Router
from litestar.enums import ParamType
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.openapi.spec import OpenAPIFormat, OpenAPIType, Operation, Parameter, Schema
from litestar.plugins import OpenAPISchemaPlugin
from litestar.static_files import create_static_files_router
from litestar.typing import FieldDefinition
from swagger_ui_bundle import swagger_ui_path

from domain import error_catalogue as catalogue

PRODUCT_PATTERN = "^[a-zA-Z0-9_-]+$"


def _product_header(*, required: bool, description: str) -> Parameter:
    return Parameter(
        name="X-Product-Name",
        param_in=ParamType.HEADER,
        required=required,
        description=description,
        schema=Schema(type=OpenAPIType.STRING, max_length=100, pattern=PRODUCT_PATTERN),
    )


_HEADER = catalogue.INVALID_HEADER.code
_QUERY = catalogue.INVALID_QUERY_PARAMETER.code
PRODUCT_REQUIRED = _product_header(
    required=True,
    description="The product that owns the connection (lower-cased; letters, digits, `_`, "
    f"`-`, at most 100). Missing or invalid: 400 {_HEADER}.",
)
PRODUCT_FILTER = _product_header(
    required=False,
    description="Lists only this product's connections (internal datasources are listed "
    f"regardless). Present but blank or invalid: 400 {_HEADER}.",
)


def _query(name: str, schema: Schema, description: str) -> Parameter:
    return Parameter(
        name=name, param_in=ParamType.QUERY, required=False, schema=schema, description=description
    )


LIST_PARAMETERS: tuple[Parameter, ...] = (
    _query(
        "limit",
        Schema(type=OpenAPIType.INTEGER, minimum=1, default=10),
        "Items per page, at most MAX_PAGINATION_LIMIT (default 100): above is "
        f"{catalogue.PAGINATION_LIMIT_EXCEEDED.code}, not a positive integer {_QUERY}.",
    ),
    _query(
        "page",
        Schema(type=OpenAPIType.INTEGER, minimum=1, default=1),
        f"Page number, from 1 ({_QUERY} otherwise).",
    ),
    _query(
        "sortOrder",
        Schema(type=OpenAPIType.STRING, enum=["asc", "desc"], default="desc"),
        f"Order by creation time, any case ({catalogue.INVALID_SORT_ORDER.code} otherwise).",
    ),
    _query(
        "type",
        Schema(
            type=OpenAPIType.STRING,
            enum=["POSTGRESQL", "MYSQL", "SQL_SERVER", "ORACLE", "MONGODB"],
        ),
        "Only connections of this engine (any case).",
    ),
    _query(
        "startDate",
        Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.DATE),
        f"First creation day, YYYY-MM-DD in UTC ({catalogue.INVALID_DATE_FORMAT.code} "
        "otherwise). Without dates the window is the last MAX_PAGINATION_MONTH_DATE_RANGE "
        "months, and never wider.",
    ),
    _query(
        "endDate",
        Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.DATE),
        "Last creation day, included, YYYY-MM-DD in UTC; before startDate is "
        f"{catalogue.INVALID_FINAL_DATE.code}.",
    ),
    _query(
        "cursor",
        Schema(type=OpenAPIType.STRING, content_encoding="base64"),
        'Accepted for compatibility: base64 of {"id": ..., "points_next": ...}, checked '
        f"({_QUERY}), then ignored; pages are numbered.",
    ),
)
LIST_DESCRIPTION = (
    "Also `metadata.<key>=<value>`: only connections whose metadata has that string value "
    "under `<key>` (at most 20 such filters). At most 50 query parameters in all; empty ones "
    "are ignored; keys starting with `$` or `_`, keys over 64 and values over 256 characters "
    f"are {_QUERY}."
)


def documented_with(*parameters: Parameter) -> type[Operation]:
    """An ``operation_class`` adding ``parameters`` to the operation in the document."""

    @dataclass
    class DocumentedOperation(Operation):
        def __post_init__(self) -> None:
            self.parameters = [*(self.parameters or ()), *parameters]

    return DocumentedOperation


class RequiredFields:
    """A request body ``msgspec.Struct`` whose document marks ``required_fields`` required.

    The Struct itself keeps every field optional, so that a missing one is answered as the
    reference does (FET-0402 naming it); the document tells clients what to send."""

    required_fields: ClassVar[tuple[str, ...]] = ()


def _without_none(annotation: Any) -> Any:
    members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if len(members) == 1 and type(None) in typing.get_args(annotation):
        return members[0]
    return annotation


class RequiredFieldsSchemaPlugin(OpenAPISchemaPlugin):
    """Component schemas of ``RequiredFields`` Structs: their fields, the required ones
    without ``null``."""

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return field_definition.is_subclass_of(RequiredFields) and field_definition.is_subclass_of(
            msgspec.Struct
        )

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        struct = field_definition.type_
        required: Sequence[str] = struct.required_fields
        hints = typing.get_type_hints(struct, include_extras=True)
        properties = {
            name: FieldDefinition.from_annotation(
                _without_none(hints[name]) if name in required else hints[name], name=name
            )
            for name in struct.__struct_fields__
        }
        schema: Schema = schema_creator.create_component_schema(
            field_definition, required=sorted(required), property_fields=properties
        )
        if struct.__doc__:
            schema.description = " ".join(struct.__doc__.split())
        return schema


ASSETS = "/assets"
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" type="image/png" href="{assets}/favicon-32x32.png">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{assets}/swagger-ui-standalone-preset.js"></script>
<script>
window.ui = SwaggerUIBundle({{
  url: {document},
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "BaseLayout"
}});
</script>
</body>
</html>
"""


class OfflineSwaggerUI(OpenAPIRenderPlugin):
    """Swagger UI whose scripts, styles and icon the service serves itself (``assets`` below
    the OpenAPI path): no CDN, no validator badge, nothing fetched from outside."""

    def __init__(self, *, path: str | Sequence[str] = ("/", "/swagger")) -> None:
        super().__init__(path=path)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        base = request.app.openapi_config.path if request.app.openapi_config else ""
        page = _PAGE.format(
            title=html.escape(openapi_schema["info"]["title"]),
            assets=f"{base}{ASSETS}",
            document=json.dumps(self.get_openapi_json_route(request)),
        )
        return page.encode()

    def receive_router(self, router: Router) -> None:
        router.register(
            create_static_files_router(
                path=ASSETS,
                directories=[Path(str(swagger_ui_path))],
                include_in_schema=False,
                name="swagger-ui-assets",
            )
        )
