"""Sealing a connection's secrets again under the newest key version."""

from __future__ import annotations

import logging
from dataclasses import replace

from application.errors import CredentialKeyMissing
from application.ports.credential_cipher import CredentialCipher
from domain.connection import Connection, SealedSecret, SslSettings

log = logging.getLogger(__name__)


def reseal(connection: Connection, cipher: CredentialCipher) -> Connection:
    """The connection with every secret sealed under the cipher's newest key version.

    Secrets already under that version are kept as they are. A secret whose version is no
    longer configured cannot be opened, so it is kept too (the connection stays unusable
    until its credentials are written again) and a warning names the version.
    """

    def fresh(secret: SealedSecret | None) -> SealedSecret | None:
        if secret is None or secret.key_version == cipher.current_version:
            return secret
        try:
            return cipher.seal(cipher.open(secret))
        except CredentialKeyMissing as error:
            log.warning("connection %s: %s", connection.config_name, error.message)
            return secret

    ssl_settings = connection.ssl
    if ssl_settings is not None:
        ssl_settings = SslSettings(
            mode=ssl_settings.mode,
            ca=fresh(ssl_settings.ca),
            cert=fresh(ssl_settings.cert),
            key=fresh(ssl_settings.key),
        )
    return replace(connection, password=fresh(connection.password), ssl=ssl_settings)


def needs_reseal(connection: Connection, current_version: str) -> bool:
    ssl_settings = connection.ssl
    secrets = [connection.password]
    if ssl_settings is not None:
        secrets += [ssl_settings.ca, ssl_settings.cert, ssl_settings.key]
    return any(s is not None and s.key_version != current_version for s in secrets)
