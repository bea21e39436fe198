"""One table from error kinds to HTTP statuses; one body shape for every error."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ExceptionHandlersMap

from application.errors import AuthServiceRefused, PermissionDenied, Unauthenticated
from domain import error_catalogue as catalogue
from domain.error_catalogue import CatalogueEntry, ErrorKind
from domain.errors import FetcherError
from entrypoints.http.body_errors import describe_invalid, describe_unparsable
from entrypoints.http.schemas import ErrorBody

log = logging.getLogger(__name__)

STATUS_OF_KIND = {
    ErrorKind.INVALID: 400,
    ErrorKind.UNAUTHENTICATED: 401,
    ErrorKind.FORBIDDEN: 403,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.CONFLICT: 409,
    ErrorKind.UNPROCESSABLE: 422,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.UNAVAILABLE: 503,
    # The reference answers 500; the datasource failed, not Fetcher, and a client or a
    # monitor must be able to tell the two apart.
    ErrorKind.UPSTREAM: 502,
    ErrorKind.INTERNAL: 500,
}

_FRAMEWORK = {
    404: catalogue.NOT_FOUND,
    405: catalogue.METHOD_NOT_ALLOWED,
    413: catalogue.BODY_TOO_LARGE,
}
"""Refusals of the framework itself (no route, another method, a body too large): their status
is the framework's; anything else it refuses below 500 is a bad request."""


def status_of(entry: CatalogueEntry) -> int:
    """The HTTP status of a catalogue entry: the one of its kind."""
    return STATUS_OF_KIND[entry.kind]


def error_response(
    status: int,
    code: str,
    title: str,
    message: str,
    fields: dict[str, str] | None = None,
    entity_type: str | None = None,
) -> Response[ErrorBody]:
    return Response(
        ErrorBody(
            code=code, title=title, message=message, fields=fields or None, entityType=entity_type
        ),
        status_code=status,
    )


def fetcher_error(_: Request[Any, Any, Any], error: FetcherError) -> Response[ErrorBody]:
    status = STATUS_OF_KIND[error.kind]
    if status >= 500:
        log.warning("request failed: %s %s", error.code, error.message)
    return error_response(
        status, error.code, error.title, error.message, error.fields, error.entity_type
    )


def unauthenticated(_: Request[Any, Any, Any], error: Unauthenticated) -> Response[ErrorBody]:
    """401 with the challenge of RFC 6750: ``error="invalid_token"`` when a token was given."""
    response = fetcher_error(_, error)
    response.headers["WWW-Authenticate"] = (
        'Bearer error="invalid_token"' if error.token_given else "Bearer"
    )
    return response


def permission_denied(_: Request[Any, Any, Any], error: PermissionDenied) -> Response[ErrorBody]:
    response = fetcher_error(_, error)
    if error.permission is not None:
        response.headers["WWW-Authenticate"] = (
            f'Bearer error="insufficient_scope", scope="{error.permission}"'
        )
    return response


def auth_service_refused(
    _: Request[Any, Any, Any], error: AuthServiceRefused
) -> Response[ErrorBody]:
    """The authorization service's own error, relayed with its status."""
    response = error_response(error.status, error.code, error.title, error.message)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response


def _entry_response(status: int, entry: CatalogueEntry, message: str) -> Response[ErrorBody]:
    return error_response(status, entry.code, entry.title, message)


def validation_error(
    request: Request[Any, Any, Any], error: ValidationException
) -> Response[ErrorBody]:
    """FET-0001 naming each JSON path that does not fit and what was expected there."""
    body = catalogue.UNPARSABLE_BODY
    message, fields = describe_invalid(request, error.extra)
    return error_response(status_of(body), body.code, body.title, message, fields)


def http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[ErrorBody]:
    entry = _FRAMEWORK.get(error.status_code, catalogue.BAD_REQUEST)
    if error.status_code == 400:
        entry = catalogue.UNPARSABLE_BODY
        message = describe_unparsable(request, str(error.detail or ""))
    elif error.status_code in (404, 405):
        message = f"Cannot {request.method} {request.url.path}"
    else:
        message = error.detail or entry.title
    if error.status_code >= 500:
        entry = catalogue.INTERNAL_ERROR
        message = entry.message
    return _entry_response(error.status_code, entry, message)


def unexpected_error(_: Request[Any, Any, Any], error: Exception) -> Response[ErrorBody]:
    log.error("unexpected error: %s", type(error).__name__, exc_info=error)
    internal = catalogue.INTERNAL_ERROR
    return _entry_response(HTTP_500_INTERNAL_SERVER_ERROR, internal, internal.message)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    FetcherError: fetcher_error,
    Unauthenticated: unauthenticated,
    PermissionDenied: permission_denied,
    AuthServiceRefused: auth_service_refused,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}


def _codes(*entries: CatalogueEntry) -> str:
    return ", ".join(entry.code for entry in entries)


_DESCRIPTIONS = {
    400: f"Bad input: {_codes(catalogue.BAD_REQUEST)} (body), FET-04xx (fields, headers, ids, "
    "query), FET-10xx (rules)",
    401: f"No bearer token, or one that does not check out ({_codes(catalogue.MISSING_TOKEN)})",
    403: "The token does not grant this route's permission "
    f"({_codes(catalogue.PERMISSION_DENIED)})",
    404: f"Not found ({_codes(catalogue.ENTITY_NOT_FOUND)})",
    409: "Conflict with the current state ("
    + _codes(
        catalogue.ENTITY_CONFLICT,
        catalogue.CONNECTION_ALREADY_ASSIGNED,
        catalogue.JOB_IN_PROGRESS,
        catalogue.CONFLICT,
    )
    + ")",
    413: f"The body is over 4 MiB ({_codes(catalogue.BODY_TOO_LARGE)})",
    422: "The service is not configured for this request ("
    + _codes(catalogue.CRM_HASH_KEY_MISSING, catalogue.CRM_ENCRYPT_KEY_MISSING)
    + ": a key of the CRM plugin, named in the message)",
    429: f"Rate limited ({_codes(catalogue.CONNECTION_TEST_RATE_LIMITED)})",
    500: f"Unexpected error ({_codes(catalogue.INTERNAL_ERROR)}) or an operational failure "
    f"({_codes(catalogue.CONNECTION_TEST_FAILED, catalogue.SCHEMA_RETRIEVAL_FAILED)})",
    503: "A dependency is unavailable ("
    + _codes(catalogue.SERVICE_UNAVAILABLE, catalogue.AUTH_SERVICE_UNAVAILABLE)
    + ")",
}


def error_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error statuses a route can answer, all in the one error shape
    (every route that answers them needs a token, hence 401 and 403)."""
    return {
        status: ResponseSpec(
            data_container=ErrorBody, description=_DESCRIPTIONS[status], generate_examples=False
        )
        for status in (401, 403, *statuses, 500, 503)
    }
