"""HTTP bodies (msgspec Structs), camel-cased as the reference API."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from domain.connection_input import ConnectionInput, SslInput
from entrypoints.http.openapi import RequiredFields


class DataRequest(msgspec.Struct, RequiredFields):
    """What to extract: datasource config name -> table -> fields (`["*"]`: every column);
    optional filters: datasource -> table -> field -> operator -> values."""

    required_fields = ("mappedFields",)
    mappedFields: dict[str, dict[str, list[str]]] | None = None
    filters: dict[str, dict[str, dict[str, dict[str, list[Any]]]]] | None = None


class FetcherRequest(msgspec.Struct, RequiredFields):
    """An extraction job. `metadata.source` (required) names the product that owns the
    connections; the rest of `metadata` is echoed in the job and its events."""

    required_fields = ("dataRequest", "metadata")
    dataRequest: DataRequest | None = None
    metadata: dict[str, Any] | None = None


class JobAccepted(msgspec.Struct):
    jobId: str
    status: str
    createdAt: str
    message: str


GoJson = Annotated[
    msgspec.Raw,
    msgspec.Meta(
        description="A JSON object as the reference stores and returns it (Go's encoding: "
        "sorted keys, numbers as float64 in their shortest form), the same bytes as in the "
        "job's events."
    ),
]


class JobProgressView(msgspec.Struct):
    """Rows and result bytes written so far by the worker, as of ``updatedAt``."""

    rows: int
    bytes: int
    updatedAt: str


class JobView(msgspec.Struct, omit_defaults=True):
    id: str
    metadata: GoJson | None = None
    mappedFields: GoJson | None = None
    filters: GoJson | None = None
    status: str = ""
    resultPath: str | None = None
    resultHmac: str | None = None
    requestHash: str | None = None
    createdAt: str | None = None
    completedAt: str | None = None
    progress: JobProgressView | None = None
    """Only while the job is processing, once its worker has reported (every few seconds)."""


class JobHistoryEntry(msgspec.Struct):
    type: str
    version: int
    timestamp: str
    facts: dict[str, Any]
    digest: str = ""
    """SHA-256 of the event's canonical encoding; empty for an event recorded before
    chaining."""
    prevDigest: str = ""
    """The digest of the version before it in the job's chain (empty for the first)."""


class AuditCheckpointView(msgspec.Struct, omit_defaults=True):
    position: int
    count: int
    root: str
    recordedAt: str
    keyId: str
    headsSha256: str
    signature: str
    heads: dict[str, list[Any]] | None = None
    """Job id -> [version, digest] of the jobs recorded since the previous checkpoint; left
    out in multi-tenant mode (the signature covers their SHA-256)."""
    headsRoot: str | None = None
    """The heads' Merkle root, which a job's inclusion proof leads to (signed; absent on
    checkpoints recorded before roots were)."""


class AuditCheckpoints(msgspec.Struct):
    checkpoints: list[AuditCheckpointView]


class JobHistory(msgspec.Struct):
    jobId: str
    events: list[JobHistoryEntry]


class SslBody(msgspec.Struct):
    mode: str | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __repr__(self) -> str:
        return f"SslBody(mode={self.mode!r})"


class ConnectionBody(msgspec.Struct):
    """A connection as sent to create or change it: absent and null members are "not sent"."""

    configName: str | None = None
    type: str | None = None
    host: str | None = None
    port: int | None = None
    databaseName: str | None = None
    schema: str | None = None
    userName: str | None = None
    password: str | None = None
    ssl: SslBody | None = None
    metadata: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"ConnectionBody(configName={self.configName!r})"

    @property
    def is_blank(self) -> bool:
        """Every member absent, null, empty text or an empty object."""
        return all(getattr(self, name) in (None, "", {}) for name in self.__struct_fields__)

    def to_input(self) -> ConnectionInput:
        ssl = self.ssl
        return ConnectionInput(
            config_name=self.configName,
            type=self.type,
            host=self.host,
            port=self.port,
            database_name=self.databaseName,
            schema=self.schema,
            user_name=self.userName,
            password=self.password,
            ssl=SslInput.sent(ssl.mode, ssl.ca, ssl.cert, ssl.key) if ssl else None,
            metadata=self.metadata,
        )


class NewConnection(ConnectionBody, RequiredFields):
    """A connection to register. `type` is one of POSTGRESQL, MYSQL, SQL_SERVER, ORACLE,
    MONGODB; `port` defaults to the engine's; `ssl.mode` follows the engine's allowlist; the
    password, CA, certificate and key are stored encrypted and never returned."""

    required_fields = ("configName", "type", "host", "databaseName", "userName", "password")


class SslView(msgspec.Struct, omit_defaults=True):
    mode: str | None = None


class ConnectionView(msgspec.Struct, omit_defaults=True):
    id: str
    productName: str | None = None
    configName: str = ""
    type: str = ""
    host: str = ""
    port: int = 0
    databaseName: str = ""
    schema: str | None = None
    userName: str = ""
    ssl: SslView | None = None
    metadata: GoJson | None = None
    createdAt: str = ""
    updatedAt: str = ""


class ConnectionList(msgspec.Struct):
    items: list[ConnectionView]
    page: int
    limit: int
    total: int


class ConnectionTestView(msgspec.Struct):
    status: str
    message: str
    latencyMs: int


class SchemaColumnView(msgspec.Struct):
    name: str
    type: str


class SchemaTableView(msgspec.Struct):
    name: str
    fields: list[str]
    columns: list[SchemaColumnView]


class ConnectionSchemaView(msgspec.Struct):
    id: str
    configName: str
    databaseName: str
    type: str
    tables: list[SchemaTableView]


class ValidateSchemaRequest(msgspec.Struct, RequiredFields):
    """Datasource config name -> table -> fields to check."""

    required_fields = ("mappedFields",)
    mappedFields: dict[str, dict[str, list[str]]] | None = None


class SchemaIssueView(msgspec.Struct, omit_defaults=True):
    type: str
    dataSourceId: str
    table: str = ""
    field: str = ""


class SchemaValid(msgspec.Struct):
    status: str
    message: str


class SchemaInvalid(msgspec.Struct):
    """The 422 body of validate-schema (its own shape in the reference, kept as is)."""

    title: str
    code: str
    message: str
    errors: list[SchemaIssueView]


class ErrorBody(msgspec.Struct, omit_defaults=True):
    code: str
    title: str
    message: str
    fields: dict[str, str] | None = None
    entityType: str | None = None
    """Only on the errors of a connection's model rules, as in the reference: ``connection``."""


class Health(msgspec.Struct, omit_defaults=True):
    status: str
    reason: str | None = None


class CheckView(msgspec.Struct, omit_defaults=True):
    status: str
    latency_ms: int | None = None
    tls: bool | None = None
    error: str | None = None
    reason: str | None = None


class ReadinessView(msgspec.Struct, omit_defaults=True):
    status: str
    checks: dict[str, CheckView]
    version: str
    deployment_mode: str
    tenant_id: str | None = None


class TenantProbeError(msgspec.Struct, omit_defaults=True):
    """The reference's body of ``/readyz/tenant/{id}`` when it cannot report (§7.3)."""

    error: str
    tenant_id: str | None = None


class VersionView(msgspec.Struct):
    version: str
    requestDate: str
