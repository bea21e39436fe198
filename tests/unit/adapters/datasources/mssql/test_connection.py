"""SQL Server connection strings for ODBC: every value brace-quoted, the driver's encryption
attributes per SSL mode; a bad setting fails before anything is dialled."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from adapters.datasources.mssql.connection import (
    DEFAULT_DRIVER,
    MICROSOFT_DRIVER,
    connection_string,
    encryption_attributes,
)
from adapters.datasources.mssql.reader import SqlServerReader
from application.errors import InvalidSslMode
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest

ENDPOINT = Endpoint(
    type=DatabaseType.SQL_SERVER,
    host="db.example",
    port=1433,
    database_name="sales",
    user_name="reader",
    password="secret",
)


def _fields(endpoint: Endpoint) -> dict[str, Any]:
    return {name: getattr(endpoint, name) for name in Endpoint.__dataclass_fields__}


def parse_odbc(text: str) -> list[tuple[str, str]]:
    """A strict reader of ODBC connection strings: ``key={value}`` pairs, ``}}`` inside."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        eq = text.index("=", i)
        key = text[i:eq]
        assert text[eq + 1] == "{", f"unquoted value for {key}"
        j = eq + 2
        value = []
        while True:
            if text[j] == "}":
                if j + 1 < len(text) and text[j + 1] == "}":
                    value.append("}")
                    j += 2
                    continue
                break
            value.append(text[j])
            j += 1
        pairs.append((key, "".join(value)))
        i = j + 1
        if i < len(text):
            assert text[i] == ";"
            i += 1
    return pairs


HOSTILE = "p}w;{x}=1;PWD={y};UID=sa ünï"


HOSTILE_WITHOUT_CLOSING_BRACE = "p;{w=1;PWD={y;DumpFile=/tmp/x ünï"


@pytest.mark.parametrize(
    ("driver", "password", "user", "database"),
    [
        (MICROSOFT_DRIVER, HOSTILE, "a;b}", "d}b"),
        (DEFAULT_DRIVER, HOSTILE_WITHOUT_CLOSING_BRACE, "a;b{", "d=b"),
    ],
)
def test_every_value_is_brace_quoted_and_survives_hostile_characters(
    driver: str, password: str, user: str, database: str
) -> None:
    endpoint = Endpoint(
        **{**_fields(ENDPOINT), "password": password, "user_name": user, "database_name": database}
    )
    pairs = parse_odbc(connection_string(endpoint, driver))
    values = dict(pairs)
    assert len(values) == len(pairs)  # no attribute added or repeated
    assert (values["PWD"], values["UID"], values["DATABASE"]) == (password, user, database)
    assert values["DRIVER"] == driver


@pytest.mark.parametrize("field", ["password", "user_name", "database_name"])
def test_freetds_refuses_values_it_would_alter(field: str) -> None:
    endpoint = Endpoint(**{**_fields(ENDPOINT), field: "x};DumpFile={/tmp/x"})
    with pytest.raises(InvalidRequest) as caught:
        connection_string(endpoint, DEFAULT_DRIVER)
    assert "x};" not in caught.value.message
    assert "Microsoft" in caught.value.message
    assert parse_odbc(connection_string(endpoint, MICROSOFT_DRIVER))


def test_freetds_takes_host_and_port_apart_and_utf8() -> None:
    assert parse_odbc(connection_string(ENDPOINT)) == [
        ("DRIVER", "FreeTDS"), ("SERVER", "db.example"), ("PORT", "1433"),
        ("ClientCharset", "UTF-8"), ("DATABASE", "sales"), ("UID", "reader"),
        ("PWD", "secret"), ("APP", "fetcher"), ("Encryption", "off"),
    ]  # fmt: skip


def test_microsoft_driver_takes_tcp_host_comma_port() -> None:
    assert parse_odbc(connection_string(ENDPOINT, MICROSOFT_DRIVER)) == [
        ("DRIVER", MICROSOFT_DRIVER), ("SERVER", "tcp:db.example,1433"), ("DATABASE", "sales"),
        ("UID", "reader"), ("PWD", "secret"), ("APP", "fetcher"), ("Encrypt", "no"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "freetds", "microsoft"),
    [
        ("", [("Encryption", "off")], [("Encrypt", "no")]),
        ("disable", [("Encryption", "off")], [("Encrypt", "no")]),
        ("false", [("Encryption", "off")], [("Encrypt", "no")]),
        ("true", [("Encryption", "require")],
         [("Encrypt", "yes"), ("TrustServerCertificate", "yes")]),
        ("strict", [("Encryption", "strict")], [("Encrypt", "strict")]),
    ],
)  # fmt: skip
def test_each_ssl_mode_maps_to_the_drivers_encryption_attributes(
    mode: str, freetds: list[Any], microsoft: list[Any]
) -> None:
    assert encryption_attributes(mode, DEFAULT_DRIVER) == freetds
    assert encryption_attributes(mode, MICROSOFT_DRIVER) == microsoft
    endpoint = Endpoint(**{**_fields(ENDPOINT), "ssl_mode": mode})
    assert parse_odbc(connection_string(endpoint))[-len(freetds) :] == freetds


@pytest.mark.parametrize("mode", ["TRUE", "require", "verify-full", "yes"])
def test_unknown_ssl_modes_are_rejected(mode: str) -> None:
    with pytest.raises(InvalidSslMode):
        connection_string(Endpoint(**{**_fields(ENDPOINT), "ssl_mode": mode}))


def test_driver_is_configurable_without_loading_odbc() -> None:
    assert SqlServerReader(driver="My Driver").driver() == "My Driver"


async def test_unknown_ssl_mode_fails_the_connection_test_before_dialling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing that dials can be loaded: the ODBC driver manager is never reached, whether or
    # not this machine has one.
    monkeypatch.setitem(sys.modules, "aioodbc", None)
    monkeypatch.setitem(sys.modules, "pyodbc", None)
    reader = SqlServerReader(driver=DEFAULT_DRIVER)
    with pytest.raises(InvalidSslMode):
        await reader.test(Endpoint(**{**_fields(ENDPOINT), "ssl_mode": "bogus"}), 1)
