"""Turning a connection into the endpoint a datasource adapter dials, opening its sealed
credentials."""

from __future__ import annotations

from dataclasses import dataclass

from application.ports.credential_cipher import CredentialCipher
from domain.connection import Connection, ConnectionIdentity, Endpoint, InternalCredentials
from domain.crm import is_crm


@dataclass(frozen=True, slots=True)
class TrustedEndpoint(Endpoint):
    """An endpoint the operator configured (an internal datasource): exempt from the SSRF
    guard, since internal databases legitimately live on private networks."""


@dataclass(slots=True)
class EndpointFactory:
    """Opens sealed credentials to build what a datasource adapter dials; an internal
    datasource brings its own, in plaintext.

    Raises ``CredentialKeyMissing`` (naming the key version) when a secret was sealed under a
    key version that is no longer configured.
    """

    cipher: CredentialCipher

    def endpoint(self, connection: Connection) -> Endpoint:
        ssl_settings = connection.ssl
        kind: type[Endpoint]
        if connection.internal:
            kind, secrets = TrustedEndpoint, connection.internal_credentials
        else:
            kind, secrets = Endpoint, self._opened(connection)
        secrets = secrets or InternalCredentials()
        return kind(
            type=connection.type,
            host=connection.host,
            port=connection.port,
            database_name=connection.database_name,
            user_name=connection.user_name,
            password=secrets.password,
            schema=connection.schema,
            ssl_mode=ssl_settings.mode if ssl_settings else "",
            ssl_ca=secrets.ssl_ca,
            ssl_cert=secrets.ssl_cert,
            ssl_key=secrets.ssl_key,
            options=dict(connection.metadata),
            identity=ConnectionIdentity(connection.tenant, connection.id, connection.version),
            plugin_crm=is_crm(connection.config_name, connection.type),
        )

    def _opened(self, connection: Connection) -> InternalCredentials:
        """A stored connection's sealed password and SSL material, opened (the plaintext
        credentials an internal datasource is configured with)."""
        open_ = self.cipher.open
        ssl = connection.ssl
        return InternalCredentials(
            password=open_(connection.password) if connection.password else "",
            ssl_ca=open_(ssl.ca) if ssl and ssl.ca else None,
            ssl_cert=open_(ssl.cert) if ssl and ssl.cert else None,
            ssl_key=open_(ssl.key) if ssl and ssl.key else None,
        )
