"""RequestJob: validate, deduplicate, check connections, record ``Requested``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.connections.recent_checks import RecentChecks
from application.errors import DatasourceError, ForbiddenHost, InvalidSslMode, connect_failure
from application.jobs.extraction_plan import ExtractionError, build_reads
from application.log_context import bind_log_fields
from application.ports.clock import Clock, IdGenerator
from application.ports.datasource_reader import DatasourceReader
from application.ports.job_repository import Jobs
from application.ports.metrics import NO_METRICS, JobMetrics
from application.ports.schema_cache import SchemaCache, SchemaKey
from application.ports.tracer import NO_TRACER, Tracer
from domain import dedup
from domain import error_catalogue as catalogue
from domain.connection import Connection, normalise_source
from domain.crm import CrmKeys, is_crm, missing_key_entry
from domain.errors import ConcurrencyConflict, CrmKeyMissing, FetcherError, InvalidRequest
from domain.job import Job, apply, request_job
from domain.names import discovery_scope
from domain.request import ExtractionRequest
from domain.schema import Schema
from domain.tenant import Tenant

log = logging.getLogger(__name__)

CONNECTION_TEST_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class RequestJobResult:
    job: Job
    created: bool


@dataclass(slots=True)
class RequestJob:
    """Records a job of ``tenant`` (``Requested``), unless an identical request of the same
    tenant already holds its request slot: validation, deduplication (per tenant), connection
    resolution among the tenant's own (a name only another tenant has is unknown, FET-1020),
    product ownership, connectivity tests and the schema check, then one append."""

    jobs: Jobs
    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader
    clock: Clock
    ids: IdGenerator
    test_timeout: float = CONNECTION_TEST_TIMEOUT
    schemas: SchemaCache | None = None
    """Schemas discovered (by validate-schema, a job or a submission): the request is checked
    against its datasources' schemas now instead of failing later as ``job.failed``; a schema
    not yet known is discovered (none: no check at submission)."""
    tracer: Tracer = field(default=NO_TRACER)
    """Its current context is recorded with the job, so the job's later work joins the
    request's trace."""
    metrics: JobMetrics = NO_METRICS
    recent_checks: RecentChecks | None = None
    crm_keys: CrmKeys = field(default_factory=CrmKeys)
    """The CRM plugin's keys: a job on ``plugin_crm`` that needs one not configured is refused."""
    """Connectivity tests that passed lately, by tenant, connection id and version: a test
    that passed within its window stands for this request's (none: every request tests)."""

    async def __call__(
        self,
        mapped_fields: Mapping[str, Any] | None,
        filters: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        *,
        tenant: Tenant,
        request_id: str = "",
    ) -> RequestJobResult:
        """``request_id`` (the HTTP request's) is recorded with a new job and travels with
        its work; it is not part of the request hash. ``tenant`` scopes everything: the
        duplicate lookup, the connections, the new job."""
        result = await self._request(mapped_fields, filters, metadata, request_id, tenant)
        bind_log_fields(job_id=str(result.job.id))
        log.info("job.requested" if result.created else "job.duplicate")
        return result

    async def _request(
        self,
        mapped_fields: Mapping[str, Any] | None,
        filters: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        request_id: str,
        tenant: Tenant,
    ) -> RequestJobResult:
        request = ExtractionRequest.create(mapped_fields, filters, metadata)
        slot_id = dedup.slot_id(request.request_hash, tenant)
        slot, existing = await self._slot(slot_id, tenant)
        if existing is not None:
            self.metrics.job_requested(duplicate=True)
            return RequestJobResult(existing, created=False)
        connections = await self._resolve(request, tenant)
        self._check_ownership(request, connections)
        self._check_crm_keys(request, connections)
        await self._test_connections(connections)
        await self._check_schemas(request, connections)
        # The slot read above is taken as it is the first time: if another request took it
        # meanwhile, the append conflicts on the slot's next version and the slot is read again.
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(ConcurrencyConflict),
            stop=stop_after_attempt(3),
            retry_error_callback=lambda _: None,
        ):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    slot, existing = await self._slot(slot_id, tenant)
                    if existing is not None:
                        self.metrics.job_requested(duplicate=True)
                        return RequestJobResult(existing, created=False)
                now = self.clock.now()
                requested = request_job(
                    self.ids.new_id(),
                    request,
                    now,
                    tenant,
                    request_id=request_id,
                    trace_context=self.tracer.carrier(),
                )
                await self.jobs.append([requested, dedup.take(slot, requested.originator_id, now)])
                self.metrics.job_requested(duplicate=False)
                return RequestJobResult(apply(requested, None), created=True)
        raise ConcurrencyConflict("the request could not be recorded; please retry")

    async def _slot(self, slot_id: UUID, tenant: Tenant) -> tuple[dedup.RequestSlot, Job | None]:
        """The request slot, and the job holding it when that job blocks a duplicate."""
        slot = await self.jobs.slot(slot_id)
        if slot.job_id is None:
            return slot, None
        job = await self.jobs.find(slot.job_id, tenant=tenant)
        if job is not None and job.blocks_duplicate(self.clock.now()):
            return slot, job
        return slot, None

    async def _resolve(self, request: ExtractionRequest, tenant: Tenant) -> dict[str, Connection]:
        names = request.datasource_names
        found = await self.directory.resolve(names, tenant=tenant)
        if not found:
            named = ", ".join(f"'{name}'" for name in sorted(names))
            entry = catalogue.NO_JOB_CONNECTIONS
            raise InvalidRequest(f"{entry.message}: no connection is named {named}", entry=entry)
        for name in names:
            if name not in found:
                missing = catalogue.MISSING_DATA_SOURCE
                raise InvalidRequest(missing.render(name=name), entry=missing)
        return found

    @staticmethod
    def _check_ownership(request: ExtractionRequest, connections: Mapping[str, Connection]) -> None:
        source = normalise_source(request.source)
        for name in sorted(connections):
            connection = connections[name]
            if connection.internal:
                continue
            if not connection.product_name:
                raise InvalidRequest(
                    f"Connection '{name}' has no product assigned. "
                    "Use the migration endpoint to assign it first.",
                    entry=catalogue.CONNECTION_NOT_ASSIGNED,
                )
            if connection.product_name != source:
                raise InvalidRequest(
                    f"Connection '{name}' does not belong to the product identified by "
                    f"source '{request.source}'",
                    entry=catalogue.PRODUCT_MISMATCH,
                )

    def _check_crm_keys(
        self, request: ExtractionRequest, connections: Mapping[str, Connection]
    ) -> None:
        for name in sorted(connections):
            if not is_crm(name, connections[name].type):
                continue
            missing = self.crm_keys.missing(
                request.mapped_fields[name], request.filters.get(name, {})
            )
            if missing:
                raise CrmKeyMissing(entry=missing_key_entry(missing[0]))

    async def _check_schemas(
        self, request: ExtractionRequest, connections: Mapping[str, Connection]
    ) -> None:
        """Refuses a table or field the datasource does not have, with the closest real names,
        whenever its schema can be known now: already discovered, or discovered within the
        test timeout (and kept for the worker). A schema that cannot be read now is left to
        the worker, which fails the job if it still cannot."""
        if self.schemas is None:
            return
        schemas = self.schemas

        async def check(name: str) -> None:
            connection = connections[name]
            tables = request.mapped_fields[name]
            scope = discovery_scope(connection.type, list(tables))
            key = SchemaKey(connection.id, connection.version, scope, connection.tenant)
            schema = await schemas.get(key)
            if schema is None:
                schema = await self._discover(connection, scope)
                if schema is None:
                    return
                await schemas.put(key, schema)
            try:
                build_reads(name, connection, schema, tables, request.filters.get(name, {}))
            except ExtractionError as error:
                detail = error.detail.removeprefix(catalogue.INVALID_DATA_REQUEST.cite(""))
                raise InvalidRequest(detail or error.message) from None

        await asyncio.gather(*(check(name) for name in request.datasource_names))

    async def _discover(self, connection: Connection, scope: tuple[str, ...]) -> Schema | None:
        try:
            endpoint = self.endpoints.endpoint(connection)
            return await asyncio.wait_for(
                self.reader.discover(endpoint, scope), self.test_timeout + 1
            )
        except (FetcherError, TimeoutError) as error:
            log.info(
                "schema of %s not known at submission (%s); the worker will check it",
                connection.config_name,
                type(error).__name__,
            )
            return None

    async def _test_connections(self, connections: Mapping[str, Connection]) -> None:
        external = [
            connections[name] for name in sorted(connections) if not connections[name].internal
        ]

        async def test(connection: Connection) -> None:
            endpoint = self.endpoints.endpoint(connection)
            await asyncio.wait_for(
                self.reader.test(endpoint, self.test_timeout), self.test_timeout + 1
            )

        async def probe(connection: Connection) -> FetcherError | None:
            try:
                if self.recent_checks is None:
                    await test(connection)
                else:
                    key = (connection.tenant.id, connection.id, connection.version)
                    await self.recent_checks.run(key, lambda: test(connection))
            except (ForbiddenHost, InvalidSslMode) as error:
                return error
            except (DatasourceError, TimeoutError, FetcherError) as error:
                log.info("connection %s failed its test: %s", connection.config_name, error)
                return InvalidRequest(
                    f"Connection '{connection.config_name}' is not available{_cause(error)}",
                    entry=catalogue.CONNECTION_DOWN,
                )
            return None

        results = await asyncio.gather(*(probe(c) for c in external))
        for error in results:
            if error is not None:
                raise error


def _cause(error: BaseException) -> str:
    """The short, secret-free cause the adapter recognised (the one the connection's ``/test``
    route gives), as a sentence to append; nothing when it recognised none."""
    reason = connect_failure(error)
    return f": {reason.value}" if reason is not None else ""
