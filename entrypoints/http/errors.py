"""One table from errors to HTTP responses; one body shape for every error."""

from __future__ import annotations

import logging

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from domain.errors import ErrorKind, FetcherError
from entrypoints.http.schemas import ErrorBody

log = logging.getLogger(__name__)

STATUS_OF_KIND = {
    ErrorKind.INVALID: 400,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.CONFLICT: 409,
    ErrorKind.UNPROCESSABLE: 422,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.INTERNAL: 500,
}

_FRAMEWORK = {
    404: ("FET-0005", "Not Found"),
    405: ("FET-0001", "Method Not Allowed"),
    413: ("FET-0001", "Request Entity Too Large"),
}


def error_response(
    status: int, code: str, title: str, message: str, fields: dict[str, str] | None = None
) -> Response[ErrorBody]:
    return Response(
        ErrorBody(code=code, title=title, message=message, fields=fields or None),
        status_code=status,
    )


def fetcher_error(_: Request, error: FetcherError) -> Response[ErrorBody]:
    status = STATUS_OF_KIND[error.kind]
    if status >= 500:
        log.warning("request failed: %s %s", error.code, error.message)
    return error_response(status, error.code, error.title, error.message, error.fields)


def validation_error(_: Request, error: ValidationException) -> Response[ErrorBody]:
    return error_response(400, "FET-0001", "Invalid payload", "unable to parse request body")


def http_error(request: Request, error: HTTPException) -> Response[ErrorBody]:
    code, title = _FRAMEWORK.get(error.status_code, ("FET-0001", "Bad Request"))
    if error.status_code == 400:
        code, title, message = "FET-0001", "Invalid payload", "unable to parse request body"
    elif error.status_code in (404, 405):
        message = f"Cannot {request.method} {request.url.path}"
    else:
        message = error.detail or title
    if error.status_code >= 500:
        code, title = "FET-0002", "Internal Server Error"
        message = FetcherError.default_message
    return error_response(error.status_code, code, title, message)


def unexpected_error(_: Request, error: Exception) -> Response[ErrorBody]:
    log.error("unexpected error: %s", type(error).__name__, exc_info=error)
    internal = FetcherError()
    return error_response(
        HTTP_500_INTERNAL_SERVER_ERROR, internal.code, internal.title, internal.message
    )


EXCEPTION_HANDLERS = {
    FetcherError: fetcher_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}


_DESCRIPTIONS = {
    400: "Bad input: FET-0001 (body), FET-04xx (fields, headers, ids, query), FET-10xx (rules)",
    404: "Not found (FET-1001)",
    409: "Conflict with the current state (FET-1002, FET-1015, FET-1021, FET-0004)",
    429: "Rate limited (FET-1043)",
    500: "Unexpected error (FET-0002) or an operational failure (FET-1041, FET-1042)",
    503: "A dependency is unavailable (FET-0003)",
}


def error_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error statuses a route can answer, all in the one error shape."""
    return {
        status: ResponseSpec(
            data_container=ErrorBody, description=_DESCRIPTIONS[status], generate_examples=False
        )
        for status in (*statuses, 500, 503)
    }
