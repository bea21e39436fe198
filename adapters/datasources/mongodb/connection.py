"""MongoDB clients on pymongo's async client, with the reference's parameters and TLS modes.

Connection (reference §3.2-3.3): host and port, credentials, ``authSource``
(``metadata.authSource``, default ``admin``), ``directConnection`` (``metadata.directConnection``
= ``"true"``) and TLS are client keyword arguments, never pasted into a URI. TLS modes:
``true``/``enable`` verify the server (against ``ssl.ca`` when given, else the system store),
``insecure`` encrypts without verifying, ``disable``/``false``/none use no TLS. The driver reads
CA and client certificates from files only: they are written to a private temporary folder, read
when the client is built, and removed at once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bson.codec_options import DatetimeConversion
from pymongo import AsyncMongoClient

from application.errors import InvalidSslMode
from domain.connection import Endpoint


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


@dataclass(frozen=True, slots=True)
class _TlsFiles:
    ca: str | None
    cert_key: str | None


def tls_options(endpoint: Endpoint, files: _TlsFiles | None = None) -> dict[str, Any]:
    """Client keyword arguments for the endpoint's SSL mode (``files``: where the CA and the
    client certificate were written)."""
    mode = endpoint.ssl_mode
    if mode in ("", "disable", "false"):
        return {}
    if mode not in ("true", "enable", "insecure"):
        raise InvalidSslMode(mode)
    options: dict[str, Any] = {"tls": True}
    if mode == "insecure":
        options["tlsInsecure"] = True
    if files is not None and files.ca is not None:
        options["tlsCAFile"] = files.ca
    if files is not None and files.cert_key is not None:
        options["tlsCertificateKeyFile"] = files.cert_key
    return options


def client_options(
    endpoint: Endpoint, timeout: float, files: _TlsFiles | None = None
) -> dict[str, Any]:
    """Everything ``AsyncMongoClient`` is built with, credentials as separate arguments."""
    host = endpoint.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    timeout_ms = max(1, int(timeout * 1000))
    options: dict[str, Any] = {
        "host": host,
        "port": endpoint.port,
        "appname": "fetcher",
        "serverSelectionTimeoutMS": timeout_ms,
        "connectTimeoutMS": timeout_ms,
        "tz_aware": True,
        "uuidRepresentation": "standard",
        "datetime_conversion": DatetimeConversion.DATETIME_AUTO,
        "directConnection": _flag(endpoint.options.get("directConnection")),
        "maxPoolSize": 4,
    }
    if endpoint.user_name:
        source = endpoint.options.get("authSource")
        options["username"] = endpoint.user_name
        options["password"] = endpoint.password
        options["authSource"] = source if isinstance(source, str) and source else "admin"
    options.update(tls_options(endpoint, files))
    return options


@contextmanager
def _tls_files(endpoint: Endpoint) -> Iterator[_TlsFiles | None]:
    if endpoint.ssl_mode in ("", "disable", "false") or not (endpoint.ssl_ca or endpoint.ssl_cert):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="fetcher-tls-") as folder:

        def write(name: str, text: str) -> str:
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            return path

        ca = write("ca.pem", endpoint.ssl_ca) if endpoint.ssl_ca else None
        cert_key = None
        if endpoint.ssl_cert:
            pem = endpoint.ssl_cert.rstrip("\n") + "\n" + (endpoint.ssl_key or "")
            cert_key = write("client.pem", pem)
        yield _TlsFiles(ca=ca, cert_key=cert_key)


def new_client(endpoint: Endpoint, timeout: float) -> AsyncMongoClient[dict[str, Any]]:
    """A client for the endpoint; certificate files exist only while it is built."""
    with _tls_files(endpoint) as files:
        return AsyncMongoClient(**client_options(endpoint, timeout, files))
