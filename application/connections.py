"""Resolving connections (internal datasources first, then stored ones), turning them into
dialable endpoints, and the errors the connection use cases share."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from uuid import UUID, uuid5

from application.errors import ConnectFailure, CredentialKeyMissing, DatasourceError
from application.ports.connection_repository import ConnectionRepository
from application.ports.credential_cipher import CredentialCipher
from domain import error_catalogue as catalogue
from domain.connection import (
    Connection,
    Endpoint,
    InternalCredentials,
    SealedSecret,
    SslSettings,
)
from domain.errors import FetcherError

log = logging.getLogger(__name__)

INTERNAL_NAMESPACE = UUID("f47ac10b-58cc-4372-a567-0e02b2c3d479")


def internal_id(config_name: str, tenant: str = "") -> UUID:
    """The deterministic id of an internal datasource: UUIDv5 over ``<tenant>/<configName>``."""
    return uuid5(INTERNAL_NAMESPACE, f"{tenant}/{config_name}")


class ConnectionInUse(FetcherError):
    """A pending or processing job reads the connection, so it cannot change now."""

    entry = catalogue.JOB_IN_PROGRESS


class ConnectionTestFailed(FetcherError):
    """The datasource could not be reached (reference: 500 "Database Connection Error")."""

    entry = catalogue.CONNECTION_TEST_FAILED

    @classmethod
    def caused_by(cls, error: BaseException) -> ConnectionTestFailed:
        """The error for a failed test, with the cause the adapter recognised (a timeout of the
        test itself is one) appended to the reference's text."""
        reason = error.reason if isinstance(error, DatasourceError) else None
        if reason is None and isinstance(error, TimeoutError):
            reason = ConnectFailure.TIMED_OUT
        return cls(f"{cls.default_message} Cause: {reason.value}." if reason else None)


class SchemaRetrievalFailed(FetcherError):
    entry = catalogue.SCHEMA_RETRIEVAL_FAILED


@dataclass(frozen=True, slots=True)
class TrustedEndpoint(Endpoint):
    """An endpoint the operator configured (an internal datasource): exempt from the SSRF
    guard, since internal databases legitimately live on private networks."""


@dataclass(slots=True)
class ConnectionDirectory:
    """Internal datasources (from configuration) first, then stored connections."""

    repository: ConnectionRepository
    internal: Mapping[str, Connection] = field(default_factory=dict)

    async def resolve(self, names: Sequence[str]) -> dict[str, Connection]:
        found = {name: self.internal[name] for name in names if name in self.internal}
        missing = [name for name in names if name not in found]
        if missing:
            found.update(await self.repository.by_config_names(missing))
        return found

    def internal_by_id(self, connection_id: UUID) -> Connection | None:
        for connection in self.internal.values():
            if connection.id == connection_id:
                return connection
        return None

    async def by_id(self, connection_id: UUID) -> Connection | None:
        """An internal datasource by its deterministic id, else a live stored connection."""
        internal = self.internal_by_id(connection_id)
        if internal is not None:
            return internal
        return await self.repository.get(connection_id)


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
        if connection.internal:
            secrets = connection.internal_credentials or InternalCredentials()
            return TrustedEndpoint(
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
            )
        open_ = self.cipher.open
        return Endpoint(
            type=connection.type,
            host=connection.host,
            port=connection.port,
            database_name=connection.database_name,
            user_name=connection.user_name,
            password=open_(connection.password) if connection.password else "",
            schema=connection.schema,
            ssl_mode=ssl_settings.mode if ssl_settings else "",
            ssl_ca=open_(ssl_settings.ca) if ssl_settings and ssl_settings.ca else None,
            ssl_cert=open_(ssl_settings.cert) if ssl_settings and ssl_settings.cert else None,
            ssl_key=open_(ssl_settings.key) if ssl_settings and ssl_settings.key else None,
            options=dict(connection.metadata),
        )


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
