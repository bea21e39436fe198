"""SQL Server connection strings for aioodbc (ODBC): driver, server, credentials, encryption.

An ODBC connection string whose every value is brace-quoted (``{...}``, a ``}`` in a value
doubled), so no password or name can add or change an attribute (FreeTDS cannot carry a ``}``:
such values are refused with it). The driver is configurable: ``FreeTDS`` by default,
Microsoft's ``ODBC Driver 18 for SQL Server`` when it is installed. SSL modes (reference §3.3,
with the meaning of ``false`` fixed): none, ``disable`` and ``false`` mean no encryption;
``true`` encrypts without verifying the certificate (``TrustServerCertificate``); ``strict`` is
TDS 8 strict encryption (FreeTDS 1.4 or later, Microsoft's driver 18).
"""

from __future__ import annotations

from application.errors import InvalidSslMode
from domain.connection import Endpoint
from domain.errors import InvalidRequest

DEFAULT_DRIVER = "FreeTDS"
MICROSOFT_DRIVER = "ODBC Driver 18 for SQL Server"


def odbc_value(value: str) -> str:
    """An ODBC connection-string value, brace-quoted so that ``;``, ``=``, ``{`` or ``}`` in it
    stay part of the value."""
    return "{" + value.replace("}", "}}") + "}"


def is_freetds(driver: str) -> bool:
    return "freetds" in driver.lower() or "libtdsodbc" in driver.lower()


def encryption_attributes(mode: str, driver: str) -> list[tuple[str, str]]:
    """Connection attributes for an SSL mode (reference §3.3; ``false`` means no encryption)."""
    freetds = is_freetds(driver)
    if mode in ("", "disable", "false"):
        return [("Encryption", "off")] if freetds else [("Encrypt", "no")]
    if mode == "true":
        if freetds:  # FreeTDS verifies nothing unless given a CA file
            return [("Encryption", "require")]
        return [("Encrypt", "yes"), ("TrustServerCertificate", "yes")]
    if mode == "strict":
        return [("Encryption", "strict")] if freetds else [("Encrypt", "strict")]
    raise InvalidSslMode(mode)


class UnsupportedCredentials(InvalidRequest):
    def __init__(self) -> None:
        super().__init__(
            "the FreeTDS ODBC driver cannot pass a '}' in the user name, password or database "
            f"name; install Microsoft's {MICROSOFT_DRIVER} to use them"
        )


def connection_string(endpoint: Endpoint, driver: str = DEFAULT_DRIVER) -> str:
    """The ODBC connection string; holds the password, so it is never logged.

    FreeTDS (1.3) ends a braced value at the first ``}`` and does not undouble ``}}``: a value
    holding ``}`` would reach the server altered, or end early and let the rest be read as other
    attributes, so such values are refused with that driver."""
    attributes: list[tuple[str, str]] = [("DRIVER", driver)]
    if is_freetds(driver):
        if any("}" in v for v in (endpoint.user_name, endpoint.password, endpoint.database_name)):
            raise UnsupportedCredentials()
        attributes += [
            ("SERVER", endpoint.host),
            ("PORT", str(endpoint.port)),
            ("ClientCharset", "UTF-8"),
        ]
    else:
        attributes += [("SERVER", f"tcp:{endpoint.host},{endpoint.port}")]
    attributes += [
        ("DATABASE", endpoint.database_name),
        ("UID", endpoint.user_name),
        ("PWD", endpoint.password),
        ("APP", "fetcher"),
    ]
    attributes += encryption_attributes(endpoint.ssl_mode, driver)
    return ";".join(f"{key}={odbc_value(value)}" for key, value in attributes)
