"""Oracle connection arguments for python-oracledb in thin mode (asyncio).

Connection: host, port and ``metadata.serviceName`` (required; ``databaseName`` is not used to
connect), credentials as driver arguments. SSL modes (the reference validates but ignores them):
none, ``disable`` and ``false`` connect over plain TCP; ``true``, ``enable`` and ``verify`` over
TLS (``tcps``) verifying the server against ``ssl.ca`` when given, else the system store;
``skip-verify`` over TLS without verification.
"""

from __future__ import annotations

from typing import Any

from adapters.datasources.common.tls import client_context
from application.errors import InvalidSslMode
from domain.connection import Endpoint
from domain.errors import InvalidRequest

SERVICE_NAME_REQUIRED = "serviceName is required in metadata for Oracle connection"


class MissingServiceName(InvalidRequest):
    def __init__(self) -> None:
        super().__init__(SERVICE_NAME_REQUIRED)


def service_name(endpoint: Endpoint) -> str:
    value = endpoint.options.get("serviceName")
    if not isinstance(value, str) or not value.strip():
        raise MissingServiceName()
    return value.strip()


def connect_arguments(endpoint: Endpoint, timeout: float) -> dict[str, Any]:
    """``oracledb.connect_async`` keyword arguments; the password is one of them."""
    arguments: dict[str, Any] = {
        "user": endpoint.user_name,
        "password": endpoint.password,
        "host": endpoint.host,
        "port": endpoint.port,
        "service_name": service_name(endpoint),
        "tcp_connect_timeout": timeout,
        "retry_count": 0,
        "program": "fetcher",
    }
    mode = endpoint.ssl_mode
    if mode in ("", "disable", "false"):
        arguments["protocol"] = "tcp"
    elif mode in ("true", "enable", "verify", "skip-verify"):
        verify = mode != "skip-verify"
        arguments["protocol"] = "tcps"
        arguments["ssl_context"] = client_context(verify=verify, ca=endpoint.ssl_ca)
        arguments["ssl_server_dn_match"] = verify
    else:
        raise InvalidSslMode(mode)
    return arguments
