"""Oracle connection arguments: credentials and service as driver arguments, TLS per SSL mode;
a bad setting fails before anything is dialled."""

from __future__ import annotations

import ssl
from typing import Any

import oracledb
import pytest

from adapters.datasources.oracle.connection import SERVICE_NAME_REQUIRED, connect_arguments
from adapters.datasources.oracle.reader import OracleReader
from application.errors import InvalidSslMode
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest

ENDPOINT = Endpoint(
    type=DatabaseType.ORACLE,
    host="db.example",
    port=1521,
    database_name="ignored",
    user_name="reader",
    password="p@ss:w/rd ünï",
    options={"serviceName": "FREEPDB1"},
)


def _fields(endpoint: Endpoint) -> dict[str, Any]:
    return {name: getattr(endpoint, name) for name in Endpoint.__dataclass_fields__}


@pytest.mark.parametrize(
    "options", [{}, {"serviceName": ""}, {"serviceName": "  "}, {"serviceName": 1}]
)
def test_service_name_is_required(options: dict[str, Any]) -> None:
    endpoint = Endpoint(**{**_fields(ENDPOINT), "options": options})
    with pytest.raises(InvalidRequest) as caught:
        connect_arguments(endpoint, 5)
    assert caught.value.message == SERVICE_NAME_REQUIRED
    assert caught.value.code == "FET-0401"


async def test_missing_service_name_fails_the_connection_test_before_dialling() -> None:
    with pytest.raises(InvalidRequest, match=SERVICE_NAME_REQUIRED):
        await OracleReader().test(Endpoint(**{**_fields(ENDPOINT), "options": {}}), 1)


def test_credentials_and_service_are_driver_arguments() -> None:
    arguments = connect_arguments(ENDPOINT, 5)
    assert arguments == {
        "user": "reader", "password": "p@ss:w/rd ünï", "host": "db.example", "port": 1521,
        "service_name": "FREEPDB1", "tcp_connect_timeout": 5, "retry_count": 0,
        "program": "fetcher", "protocol": "tcp",
    }  # fmt: skip
    params = oracledb.ConnectParams(**{k: v for k, v in arguments.items() if k != "password"})
    assert params.service_name == "FREEPDB1"
    assert "p@ss" not in params.get_connect_string()


@pytest.mark.parametrize("mode", ["", "disable", "false"])
def test_ssl_off_modes_use_plain_tcp(mode: str) -> None:
    arguments = connect_arguments(Endpoint(**{**_fields(ENDPOINT), "ssl_mode": mode}), 5)
    assert arguments["protocol"] == "tcp"
    assert "ssl_context" not in arguments


@pytest.mark.parametrize("mode", ["true", "enable", "verify"])
def test_verifying_ssl_modes_check_the_certificate_and_its_name(mode: str) -> None:
    arguments = connect_arguments(Endpoint(**{**_fields(ENDPOINT), "ssl_mode": mode}), 5)
    assert arguments["protocol"] == "tcps"
    assert arguments["ssl_server_dn_match"] is True
    context = arguments["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_ssl_skip_verify_encrypts_without_verifying() -> None:
    arguments = connect_arguments(Endpoint(**{**_fields(ENDPOINT), "ssl_mode": "skip-verify"}), 5)
    assert arguments["protocol"] == "tcps"
    assert arguments["ssl_server_dn_match"] is False
    assert arguments["ssl_context"].verify_mode == ssl.CERT_NONE


def test_unknown_ssl_mode_is_rejected() -> None:
    with pytest.raises(InvalidSslMode):
        connect_arguments(Endpoint(**{**_fields(ENDPOINT), "ssl_mode": "require"}), 5)
