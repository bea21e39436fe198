"""Every ``FET-`` code this service uses, with its title, default message and kind.

This module is the only place a code is written down: errors, adapters and the HTTP layer take
their code, title and message from an entry here, and the HTTP layer decides the status of each
kind in one table. Most entries are codes of the reference's catalogue (§2.2.2) and the worker
codes that appear in failure texts (§5.9), with the reference's titles; a few are this service's
own, in gaps the reference leaves:

- FET-1022 ``Invalid Job Transition``: a command that does not fit a job's state (the reference
  has no such error; its FET-0409 is the list's ``Invalid Final Date Error``). Next to FET-1020
  and FET-1021, the reference's job errors.
- FET-1023 ``Extraction Failed``: a job that could not be extracted; only its message is ever
  shown, inside ``job.failed`` (the reference's engine errors carry no code).
- FET-1041, FET-1042, FET-1043: the reference's integer-coded test and schema failures and its
  rate limit, given stable codes after its FET-1040 ``Connection Down``.
- FET-0006 ``Unauthorized`` (401), FET-0007 ``Forbidden`` (403), FET-0008 ``Auth Service
  Unavailable`` (503) and FET-0009 ``Auth Service Error`` (the authorization service's own
  status): the reference answers a missing token and a denial in plain text (``Missing
  Token``, ``Forbidden``) with no code at all. They sit with FET-0001..0005, the reference's
  general codes named after HTTP statuses, in the gap it leaves before its worker codes
  (FET-0050 on).

A message with ``{name}`` placeholders is a template: ``render`` fills it in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final


class ErrorKind(Enum):
    """What sort of rule was broken; the HTTP layer maps each kind to one status."""

    INVALID = "invalid"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNPROCESSABLE = "unprocessable"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    UPSTREAM = "upstream"
    """A server Fetcher was asked to reach answered wrongly or not at all (a datasource
    under test): not Fetcher's own failure."""
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    code: str
    title: str
    kind: ErrorKind
    message: str
    """The default message, or a template with ``{name}`` placeholders."""

    def render(self, **values: object) -> str:
        return self.message.format(**values)

    def cite(self, message: str) -> str:
        """``<code> - <message>``: how the reference quotes a validation error in a text."""
        return f"{self.code} - {message}"


_INVALID = ErrorKind.INVALID
_MALFORMED = "The server could not understand the request due to malformed syntax. "
_MISSING = (
    "Your request is missing one or more required fields. Please refer to the documentation to "
    "ensure all necessary fields are included in your request."
)
_INVALID_DATA = "The request contains invalid data. Please check the request payload and try again."

# General errors

UNPARSABLE_BODY: Final = CatalogueEntry(
    "FET-0001", "Invalid payload", _INVALID, "unable to parse request body"
)
EMPTY_BODY: Final = CatalogueEntry("FET-0001", "Invalid payload", _INVALID, "empty request body")
INVALID_FIELDS: Final = CatalogueEntry(
    "FET-0001",
    "Bad Request",
    _INVALID,
    _MALFORMED + "Please check the listed fields and try again.",
)
BAD_REQUEST: Final = CatalogueEntry(
    "FET-0001", "Bad Request", _INVALID, _MALFORMED + "Please check the request and try again."
)
METHOD_NOT_ALLOWED: Final = CatalogueEntry(
    "FET-0001", "Method Not Allowed", _INVALID, "Method Not Allowed"
)
"""A route that exists, asked with another method (the HTTP layer answers 405)."""
BODY_TOO_LARGE: Final = CatalogueEntry(
    "FET-0001", "Request Entity Too Large", _INVALID, "Request Entity Too Large"
)
"""A body over the size limit (the HTTP layer answers 413)."""
REQUEST_TIMEOUT: Final = CatalogueEntry(
    "FET-0001",
    "Request Timeout",
    _INVALID,
    "The request {part} did not arrive within {seconds} seconds.",
)
"""Headers or a body too slow to arrive (the HTTP server answers 408 and closes)."""
INTERNAL_ERROR: Final = CatalogueEntry(
    "FET-0002",
    "Internal Server Error",
    ErrorKind.INTERNAL,
    "The server encountered an unexpected error. Please try again later or contact support.",
)
SERVICE_UNAVAILABLE: Final = CatalogueEntry(
    "FET-0003",
    "Service Unavailable",
    ErrorKind.UNAVAILABLE,
    "The server is currently unable to handle the request due to temporary overloading or "
    "maintenance of the server. Please try again later.",
)
CONFLICT: Final = CatalogueEntry(
    "FET-0004",
    "Conflict",
    ErrorKind.CONFLICT,
    "The request could not be completed due to a conflict with the current state of the "
    "resource. Please resolve the conflict and try again.",
)
NOT_FOUND: Final = CatalogueEntry(
    "FET-0005",
    "Not Found",
    ErrorKind.NOT_FOUND,
    "The requested resource could not be found. Please check the request and try again.",
)

# Authentication and authorisation

MISSING_TOKEN: Final = CatalogueEntry(
    "FET-0006",
    "Unauthorized",
    ErrorKind.UNAUTHENTICATED,
    "This route requires a bearer token in the Authorization header.",
)
INVALID_TOKEN: Final = CatalogueEntry(
    "FET-0006",
    "Unauthorized",
    ErrorKind.UNAUTHENTICATED,
    "The bearer token is not valid: {reason}.",
)
PERMISSION_DENIED: Final = CatalogueEntry(
    "FET-0007",
    "Forbidden",
    ErrorKind.FORBIDDEN,
    "The token does not grant the permission '{permission}' this route requires.",
)
DENIED_BY_AUTH_SERVICE: Final = CatalogueEntry(
    "FET-0007", "Forbidden", ErrorKind.FORBIDDEN, "The authorization service denied this request."
)
AUTH_SERVICE_UNAVAILABLE: Final = CatalogueEntry(
    "FET-0008",
    "Auth Service Unavailable",
    ErrorKind.UNAVAILABLE,
    "The authorization service could not be reached. Please try again later.",
)
SIGNING_KEYS_UNAVAILABLE: Final = CatalogueEntry(
    "FET-0008",
    "Auth Service Unavailable",
    ErrorKind.UNAVAILABLE,
    "The token issuer's signing keys could not be fetched. Please try again later.",
)
AUTH_SERVICE_ERROR: Final = CatalogueEntry(
    "FET-0009",
    "Auth Service Error",
    ErrorKind.INTERNAL,
    "The authorization service refused the request.",
)
"""An error answer of the authorization service whose body is not in this service's error
shape; the HTTP layer relays it with that service's status."""

# Request errors

INVALID_DATA_REQUEST: Final = CatalogueEntry(
    "FET-0401", "Invalid Data Request", _INVALID, _INVALID_DATA
)
INVALID_FILTER_REFERENCES: Final = CatalogueEntry(
    "FET-0401", "Invalid Filter References", _INVALID, _INVALID_DATA
)
MISSING_FIELDS: Final = CatalogueEntry("FET-0402", "Missing Fields in Request", _INVALID, _MISSING)
MISSING_REQUIRED_FIELD: Final = CatalogueEntry(
    "FET-0402", "Missing Required Field", _INVALID, _MISSING
)
INVALID_FIELD_VALUE: Final = CatalogueEntry("FET-0402", "Invalid Field Value", _INVALID, _MISSING)
INVALID_HEADER: Final = CatalogueEntry(
    "FET-0403",
    "Invalid header",
    _INVALID,
    "One or more header values are missing or incorrectly formatted. "
    "Please verify required headers {headers}.",
)
INVALID_PATH_PARAMETER: Final = CatalogueEntry(
    "FET-0404",
    "Invalid Path Parameter",
    _INVALID,
    "Path parameters is in an incorrect format. Please check the following parameter "
    "{parameter} and ensure they meet the required format before trying again.",
)
INVALID_QUERY_PARAMETER: Final = CatalogueEntry(
    "FET-0405",
    "Invalid Query Parameter",
    _INVALID,
    "One or more query parameters are in an incorrect format. Please check the following "
    "parameters '{name}' and ensure they meet the required format before trying again.",
)
PAGINATION_LIMIT_EXCEEDED: Final = CatalogueEntry(
    "FET-0406",
    "Pagination Limit Exceeded",
    _INVALID,
    "The pagination limit exceeds the maximum allowed of {limit} items per page. "
    "Please verify the limit and try again.",
)
INVALID_SORT_ORDER: Final = CatalogueEntry(
    "FET-0407",
    "Invalid Sort Order",
    _INVALID,
    "The 'sort_order' field must be 'asc' or 'desc'. Please provide a valid sort order and "
    "try again.",
)
INVALID_DATE_FORMAT: Final = CatalogueEntry(
    "FET-0408",
    "Invalid Date Format Error",
    _INVALID,
    "The 'initialDate', 'finalDate', or both are in the incorrect format. "
    "Please use the 'yyyy-mm-dd' format and try again.",
)
INVALID_FINAL_DATE: Final = CatalogueEntry(
    "FET-0409",
    "Invalid Final Date Error",
    _INVALID,
    "The 'finalDate' cannot be earlier than the 'initialDate'. "
    "Please verify the dates and try again.",
)
INVALID_SSL_MODE: Final = CatalogueEntry(
    "FET-0413",
    "Invalid SSL Mode",
    _INVALID,
    "Invalid SSL mode. The provided SSL mode '{mode}' is not supported. "
    "Please use a valid SSL mode for this database type.",
)
FORBIDDEN_HOST: Final = CatalogueEntry(
    "FET-0414", "Forbidden Host", _INVALID, "Host is not a valid external database endpoint"
)

# Business rules: entities, products, jobs, connections, schema validation

ENTITY_NOT_FOUND: Final = CatalogueEntry(
    "FET-1001",
    "Entity Not Found",
    ErrorKind.NOT_FOUND,
    "It was not possible to find the {entity} entity during the requested flow. "
    "Please review the data provided in the request.",
)
ENTITY_CONFLICT: Final = CatalogueEntry(
    "FET-1002",
    "Conflict",
    ErrorKind.CONFLICT,
    "An entity of type {entity} with the same unique attributes already exists. Please use "
    "different values to avoid conflicts and review the data provided in the request.",
)
CONNECTION_NOT_ASSIGNED: Final = CatalogueEntry(
    "FET-1014",
    "Connection Not Assigned",
    _INVALID,
    "The connection is not assigned to any product.",
)
CONNECTION_ALREADY_ASSIGNED: Final = CatalogueEntry(
    "FET-1015",
    "Connection Already Assigned",
    ErrorKind.CONFLICT,
    "The {entity} is already assigned to a product and cannot be reassigned.",
)
PRODUCT_MISMATCH: Final = CatalogueEntry(
    "FET-1016",
    "Product Mismatch",
    _INVALID,
    "One or more datasources do not belong to the specified product.",
)
NO_JOB_CONNECTIONS: Final = CatalogueEntry(
    "FET-1020",
    "No Connections Found",
    _INVALID,
    "No connections configured for the requested datasources",
)
MISSING_DATA_SOURCE: Final = CatalogueEntry(
    "FET-1020",
    "Missing Data Source",
    _INVALID,
    "No connection configured for datasource '{name}'",
)
JOB_IN_PROGRESS: Final = CatalogueEntry(
    "FET-1021",
    "Job In Progress",
    ErrorKind.CONFLICT,
    "The operation cannot be completed because there are active jobs for this connection.",
)
INVALID_JOB_TRANSITION: Final = CatalogueEntry(
    "FET-1022",
    "Invalid Job Transition",
    ErrorKind.CONFLICT,
    "The job cannot take this step in its current state.",
)
EXTRACTION_FAILED: Final = CatalogueEntry(
    "FET-1023",
    "Extraction Failed",
    ErrorKind.INTERNAL,
    "The job could not be extracted.",
)
CONNECTION_DOWN: Final = CatalogueEntry(
    "FET-1040",
    "Connection Down",
    _INVALID,
    "The database connection is not available. "
    "Please check the connection configuration and try again.",
)
CONNECTION_TEST_FAILED: Final = CatalogueEntry(
    "FET-1041",
    "Database Connection Error",
    ErrorKind.UPSTREAM,
    "The adapter failed to connect to the target data source. "
    "Check credentials and network access.",
)
SCHEMA_RETRIEVAL_FAILED: Final = CatalogueEntry(
    "FET-1042",
    "Schema Retrieval Error",
    ErrorKind.INTERNAL,
    "Failed to retrieve database schema information.",
)
CONNECTION_TEST_RATE_LIMITED: Final = CatalogueEntry(
    "FET-1043",
    "Rate Limit Exceeded",
    ErrorKind.RATE_LIMITED,
    "Connection test limit reached. Try again in {seconds} seconds.",
)
SCHEMA_VALIDATION_FAILED: Final = CatalogueEntry(
    "FET-1060",
    "Schema validation failed",
    ErrorKind.UNPROCESSABLE,
    "Schema validation found inconsistencies.",
)
VALIDATION_LIMIT_EXCEEDED: Final = CatalogueEntry(
    "FET-1061",
    "Validation Limit Exceeded",
    _INVALID,
    "The request asks to validate more datasources, tables or fields than allowed.",
)
NO_SCHEMA_CONNECTIONS: Final = CatalogueEntry(
    "FET-1062",
    "No Connections Found",
    _INVALID,
    "No connections configured for the requested datasources",
)

# Tenants (multi-tenant mode)

TENANT_REQUIRED: Final = CatalogueEntry(
    "FET-1080",
    "Tenant Context Required",
    _INVALID,
    "The request requires a tenant context. Ensure the token carries a tenant claim.",
)
INVALID_TENANT: Final = CatalogueEntry(
    "FET-1080",
    "Tenant Context Required",
    _INVALID,
    "The request requires a tenant context. The token's tenant claim is not a valid tenant id "
    "(1 to 64 letters, digits, '_' or '-', starting with a letter or a digit).",
)
TENANT_NOT_FOUND: Final = CatalogueEntry(
    "FET-1081",
    "Tenant Not Found",
    ErrorKind.NOT_FOUND,
    "The specified tenant was not found. Verify the tenant ID and try again.",
)

# Worker errors (reference §5.9): never an HTTP answer

INVALID_MESSAGE: Final = CatalogueEntry(
    "FET-0050", "Invalid Message", _INVALID, "message payload is null"
)
"""A work message that cannot be trusted or read (its signature does not verify)."""


def _crm_key_missing(code: str, key: str, setting: str, needed_by: str) -> CatalogueEntry:
    """The CRM plugin's ``key`` key (its ``setting``), which a job needs, is not configured."""
    return CatalogueEntry(
        code,
        "CRM Crypto Not Configured",
        ErrorKind.UNPROCESSABLE,
        f"CRM {key} secret key not configured (set {setting}: {needed_by})",
    )


CRM_HASH_KEY_MISSING: Final = _crm_key_missing(
    "FET-0057",
    "hash",
    "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM",
    "filters on plugin_crm's searched fields compare hashes made with it",
)
CRM_ENCRYPT_KEY_MISSING: Final = _crm_key_missing(
    "FET-0058",
    "encrypt",
    "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM",
    "reading plugin_crm's document, name or a dotted field decrypts with it",
)
CRM_COLLECTIONS_NOT_FOUND: Final = CatalogueEntry(
    "FET-0059",
    "Collection Not Found",
    _INVALID,
    'no collections found matching prefix "{prefix}" in plugin_crm database',
)


CATALOGUE: Final[tuple[CatalogueEntry, ...]] = tuple(
    entry for entry in tuple(globals().values()) if isinstance(entry, CatalogueEntry)
)
"""Every entry above, in the order written."""


REMEDIES: Final[dict[str, str]] = {
    "FET-0001": "Fix the request as the message says: it names the JSON path and what was "
    "expected there, or the line and column of invalid JSON. Send `Content-Type: "
    "application/json`, stay under the body size limit, and send the whole body promptly.",
    "FET-0002": "Fetcher failed unexpectedly. Retry later; if it persists, give the operator the "
    "response's `X-Request-Id`: the log line with that id has the cause.",
    "FET-0003": "A dependency (database, broker, storage) is down or the service is draining. "
    "Retry with backoff; operators see which one in `/readyz`.",
    "FET-0004": "Read the resource again and resolve the conflict before retrying.",
    "FET-0005": "Check the path and the id; a job or connection of another tenant is not found "
    "either.",
    "FET-0006": "Send `Authorization: Bearer <token>` with a token from the configured issuer, "
    "not expired, for this audience; the message says what was wrong with it.",
    "FET-0007": "Ask for a token that grants the permission the message names (or that the "
    "authorization service allows).",
    "FET-0008": "The token issuer or the authorization service did not answer: retry later; "
    "operators check `FETCHER_AUTH_ISSUER` / the plugin address and `fetcher check`.",
    "FET-0009": "The authorization service refused with its own status; see its message.",
    "FET-0050": "A work message whose signature did not verify or could not be read: it is "
    "dead-lettered. Check that every role shares the same `APP_ENC_KEY`.",
    "FET-0057": "Set `CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM` (the CRM plugin's hash key) on the api "
    "and worker roles, or leave the searched fields out of the job's filters.",
    "FET-0058": "Set `CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM` (the CRM plugin's AES key, hex) on the "
    "api and worker roles, or request only fields that are not encrypted.",
    "FET-0059": "The CRM plugin keeps a collection `c` as `c_<organisation>`: check the name "
    "in `GET /v1/management/connections/{id}/schema` of the `plugin_crm` connection.",
    "FET-0401": "Check `dataRequest`: each datasource maps tables to a list of field names, and "
    "each filter refers to a requested datasource, table and field.",
    "FET-0402": "Add the fields the message lists; see the request examples in the API guide.",
    "FET-0403": "Send the headers the message names, in the documented format.",
    "FET-0404": "Use an id in the documented format (a UUID).",
    "FET-0405": "Correct the query parameter the message names.",
    "FET-0406": "Ask for at most the maximum page size the message gives.",
    "FET-0407": "Use `asc` or `desc`.",
    "FET-0408": "Use `yyyy-mm-dd` dates.",
    "FET-0409": "Give a final date on or after the initial date.",
    "FET-0413": "Use an SSL mode the database type supports (the message names the one sent).",
    "FET-0414": "Point the connection at a database host Fetcher may reach: loopback, link-local "
    "and metadata addresses are refused unless the operator allows them.",
    "FET-1001": "Check the id: the entity does not exist (or belongs to another tenant).",
    "FET-1002": "Another entity already uses the value the message names (a connection's "
    "`configName`): choose another, or update the existing one.",
    "FET-1014": "Assign the connection to a product first.",
    "FET-1015": "The connection already belongs to a product: create another connection.",
    "FET-1016": "Ask only for datasources of the product given.",
    "FET-1020": "Register a connection under each `configName` the job names (the message "
    "names the missing ones), or correct the names.",
    "FET-1021": "Wait for the connection's running jobs to end, then retry.",
    "FET-1022": "The job already moved on (completed, failed or claimed by another worker); read "
    "it again.",
    "FET-1023": "Read the job's `metadata.error` (or the `job.failed` event): it says which "
    "datasource failed and why; fix the source or the request and submit again.",
    "FET-1040": "The connection's database could not be reached or refused the login at job "
    "creation; the message gives the cause. Fix the connection (`PATCH` it) or the database, "
    "then test it with `POST /v1/management/connections/{id}/test`.",
    "FET-1041": "The connection test failed (502: the datasource, not Fetcher): check host, "
    "port, credentials, SSL mode and network access; the message gives the cause.",
    "FET-1042": "Fetcher could not read the database's schema: check the user's privileges on "
    "the catalog and retry.",
    "FET-1043": "Wait the number of seconds the message gives before testing again.",
    "FET-1060": "The response lists each unknown datasource, table or field with the closest "
    "real names: correct the request.",
    "FET-1061": "Validate fewer datasources, tables or fields per request.",
    "FET-1062": "Register a connection under each `configName` the validation names.",
    "FET-1080": "In multi-tenant mode use a token carrying a valid tenant claim.",
    "FET-1081": "Check the tenant id; the tenant has no data in this deployment.",
}
"""What to do about each code, as the errors reference (``docs/api/errors.md``) says it."""
