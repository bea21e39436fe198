"""What the HTTP layer and the runners get from the composition root."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from application.commands.assign_connection import AssignConnection
from application.commands.check_connection import CheckConnection
from application.commands.register_connection import ALL_TYPES, RegisterConnection
from application.commands.remove_connection import RemoveConnection
from application.commands.request_job import RequestJob
from application.commands.update_connection import UpdateConnection
from application.connections import ConnectionDirectory, EndpointFactory
from application.ports.clock import Clock, IdGenerator
from application.ports.credential_cipher import CredentialCipher
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_index import JobIndex
from application.ports.rate_limiter import RateLimiter
from application.ports.schema_cache import SchemaCache
from application.queries.connection_schema import GetConnectionSchema
from application.queries.connections import GetConnection, ListConnections
from application.queries.get_job import GetJob, GetJobHistory
from application.queries.unassigned_connections import ListUnassignedConnections
from application.queries.validate_schema import ValidateSchema
from domain.connection import DatabaseType

Check = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class ConnectionServices:
    """The connection use cases, one per route."""

    register: RegisterConnection
    update: UpdateConnection
    remove: RemoveConnection
    check: CheckConnection
    assign: AssignConnection
    get: GetConnection
    list: ListConnections
    list_unassigned: ListUnassignedConnections
    schema: GetConnectionSchema
    validate_schema: ValidateSchema
    max_page_limit: int = 100


def connection_services(
    *,
    directory: ConnectionDirectory,
    endpoints: EndpointFactory,
    reader: DatasourceReader,
    clock: Clock,
    ids: IdGenerator,
    jobs: JobIndex,
    cache: SchemaCache,
    limiter: RateLimiter,
    guard: HostGuard | None = None,
    supported: Collection[DatabaseType] = ALL_TYPES,
    max_page_limit: int = 100,
    max_months: int = 1,
) -> ConnectionServices:
    """Wires the connection use cases on the given adapters (the composition root and the
    tests build them the same way). ``reader`` is expected to guard dials already when the
    SSRF guard is on; ``guard`` is for the checks at write time."""
    repository = directory.repository
    cipher: CredentialCipher = endpoints.cipher
    return ConnectionServices(
        register=RegisterConnection(repository, cipher, clock, ids, guard, supported),
        update=UpdateConnection(repository, cipher, clock, jobs, cache, guard, supported),
        remove=RemoveConnection(repository, clock, jobs, cache),
        check=CheckConnection(directory, endpoints, reader, limiter),
        assign=AssignConnection(repository, cipher, clock),
        get=GetConnection(directory),
        list=ListConnections(directory, clock, max_months),
        list_unassigned=ListUnassignedConnections(repository, clock, max_months),
        schema=GetConnectionSchema(directory, endpoints, reader),
        validate_schema=ValidateSchema(directory, endpoints, reader, cache),
        max_page_limit=max_page_limit,
    )


@dataclass(slots=True)
class ApiServices:
    request_job: RequestJob
    get_job: GetJob
    get_job_history: GetJobHistory
    connections: ConnectionServices
    checks: dict[str, Check] = field(default_factory=dict)
    version: str = "0.0.0"
    on_job_recorded: Callable[[], None] = lambda: None
