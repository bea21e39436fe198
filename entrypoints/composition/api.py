"""The API role: the use cases behind the routes, on the shared infrastructure."""

from __future__ import annotations

from collections.abc import Collection

from adapters.common.clock import Uuid7Generator
from adapters.memory.rate_limiter import InMemoryTokenBucket
from adapters.memory.schema_cache import InMemorySchemaCache
from application.audit.bundle import ExportBundle
from application.audit.checkpoints import ListCheckpoints
from application.audit.proof import ProveJob
from application.audit.verify_job import VerifyJob
from application.connections.cached import CachingConnectionRepository
from application.connections.commands.assign_connection import AssignConnection
from application.connections.commands.check_connection import CheckConnection
from application.connections.commands.register_connection import ALL_TYPES, RegisterConnection
from application.connections.commands.remove_connection import RemoveConnection
from application.connections.commands.update_connection import UpdateConnection
from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.connections.queries.connection_schema import GetConnectionSchema
from application.connections.queries.get_connection import GetConnection
from application.connections.queries.list_connections import ListConnections
from application.connections.queries.unassigned_connections import ListUnassignedConnections
from application.connections.queries.validate_schema import ValidateSchema
from application.connections.recent_checks import RecentChecks
from application.jobs.commands.request_job import RequestJob
from application.jobs.fresh_index import FreshJobIndex
from application.jobs.queries.get_job import GetJob, GetJobHistory
from application.jobs.queries.search_jobs import SearchJobs
from application.jobs.repository import EventSourcedJobs
from application.ports.clock import Clock, IdGenerator
from application.ports.credential_cipher import CredentialCipher
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_index import JobIndex
from application.ports.rate_limiter import RateLimiter
from application.ports.schema_cache import SchemaCache
from domain.connection import DatabaseType
from entrypoints.composition.infrastructure import Infrastructure, load_audit_keys
from entrypoints.composition.overrides import Overrides
from entrypoints.http.auth import HttpSecurity
from entrypoints.roles import (
    ApiServices,
    ConnectionServices,
    ConsoleServices,
    ConsoleSignIn,
    Probes,
    Relay,
)


def api_role(
    infra: Infrastructure,
    overrides: Overrides,
    security: HttpSecurity,
    probes: Probes,
    worker_lookups: CachingConnectionRepository | None,
    relay: Relay | None,
) -> ApiServices:
    """The API on ``infra``. Its name lookups may be remembered briefly; its writes forget
    them, and the worker's in this process (``worker_lookups``). In one process, a recorded
    job wakes the relay's followers at once."""
    settings, clock = infra.settings, infra.clock
    options = settings.connections
    schema_cache = overrides.schema_cache
    if schema_cache is None:
        schema_cache = InMemorySchemaCache(options.schema_cache_ttl_seconds)
    limiter = overrides.test_limiter
    if limiter is None:
        limiter = InMemoryTokenBucket(capacity=10, per_minute=10)
    ids = Uuid7Generator() if overrides.ids is None else overrides.ids
    directory = ConnectionDirectory(
        CachingConnectionRepository(
            infra.tables.connections,
            options.lookup_cache_seconds,
            clock,
            linked=(worker_lookups,) if worker_lookups is not None else (),
        ),
        infra.directory.internal,
        visible_to=infra.directory.visible_to,
    )
    store = infra.events.store
    jobs = EventSourcedJobs(store)
    audit_log, checkpoints = infra.events.audit_log, infra.checkpoints
    prove = (
        ProveJob(jobs, audit_log, checkpoints)
        if audit_log is not None and checkpoints is not None
        else None
    )
    return ApiServices(
        request_job=RequestJob(
            jobs,
            directory,
            infra.endpoints,
            infra.reader,
            clock,
            ids,
            schemas=schema_cache,
            tracer=infra.tracer,
            metrics=infra.metrics,
            recent_checks=RecentChecks(options.check_cache_seconds, clock),
            crm_keys=options.crm_keys,
        ),
        get_job=GetJob(jobs, progress=infra.progress),
        get_job_history=GetJobHistory(jobs),
        connections=connection_services(
            directory=directory,
            endpoints=infra.endpoints,
            reader=infra.reader,
            clock=clock,
            ids=ids,
            jobs=FreshJobIndex(infra.tables.jobs, store),
            cache=schema_cache,
            limiter=limiter,
            guard=infra.host_guard,
            supported=frozenset(infra.engines),
            max_page_limit=options.max_pagination_limit,
            max_months=options.max_pagination_months,
        ),
        probes=probes,
        version=settings.version,
        tenancy=settings.tenancy.tenancy,
        tracer=infra.tracer,
        security=security,
        list_checkpoints=ListCheckpoints(infra.checkpoints)
        if infra.checkpoints is not None
        else None,
        console=console_services(infra, prove),
        prove_job=prove,
    )


def console_services(infra: Infrastructure, prove: ProveJob | None) -> ConsoleServices:
    """The console's queries on the API's stores: the job list from the job index (caught up
    with the log first), proofs and bundles from the event log and its checkpoints, checked
    with every audit key version's public key."""
    settings, auth = infra.settings, infra.settings.security
    sign_in = (
        ConsoleSignIn(auth.issuer, auth.console_client_id)
        if auth.issuer is not None and auth.console_client_id
        else None
    )
    search = SearchJobs(FreshJobIndex(infra.tables.jobs, infra.events.store), infra.progress)
    if prove is None:
        return ConsoleServices(search, sign_in=sign_in)
    keys = load_audit_keys(settings, infra.ring).keys
    return ConsoleServices(
        search,
        verify_job=VerifyJob(prove, keys, infra.witnesses),
        export_bundle=ExportBundle(prove.log, prove.checkpoints),
        checkpoint_keys=keys,
        sign_in=sign_in,
    )


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
    """Wires the connection use cases on the given adapters. ``reader`` is expected to guard
    dials already when the SSRF guard is on; ``guard`` is for the checks at write time."""
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
