"""TLS client contexts for the SQL readers (PostgreSQL, MySQL, Oracle): TLS 1.2 or later, the
server verified against the connection's CA (else the system trust store) or not at all, and a
PEM client certificate loaded from memory."""

from __future__ import annotations

import os
import ssl
import tempfile


def client_context(
    *, verify: bool, ca: str | None = None, check_hostname: bool = True
) -> ssl.SSLContext:
    """A client context; ``verify=False`` encrypts without checking the server at all."""
    if verify:
        context = ssl.create_default_context(cadata=ca or None)
        context.check_hostname = check_hostname
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def load_client_certificate(context: ssl.SSLContext, cert: str, key: str | None) -> None:
    """Loads a PEM client certificate (and key) into ``context``."""
    # ssl only loads certificates from files: a private folder, removed at once.
    with tempfile.TemporaryDirectory(prefix="fetcher-tls-") as folder:
        paths = []
        for name, pem in (("cert.pem", cert), ("key.pem", key)):
            if pem is None:
                continue
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(pem)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1] if len(paths) > 1 else None)
