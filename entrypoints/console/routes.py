"""The console's routes: the page itself and its scripts (open: they hold no data), and the
fragments it shows (``/v1/console/...``: HTML rendered from the same use cases as the API,
behind the same authentication, permission guard and tenant).

A fragment's route needs the permission of the API route it mirrors: the job list and a job
``fetcher:get``, a job's history and its proof ``fetcher:history``, connections
``connections:get`` (a test ``connections:post``), checkpoints and bundles ``fetcher:history``.
Errors answer as the API's do (JSON with the FET code); the page shows them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Stream, Template
from litestar.static_files import create_static_files_router
from litestar.types import ControllerRouterHandler

from application.connections.queries.list_connections import ListFilter
from application.errors import PermissionDenied
from application.ports.audit import SignatureCheck
from application.ports.job_index import JOB_STATUSES, JobSearch
from application.timefmt import rfc3339nano
from domain import error_catalogue as catalogue
from domain.errors import FetcherError
from domain.identity import Permission
from domain.request import thaw
from domain.tenant import Tenant
from entrypoints.console.explain import explain_failure
from entrypoints.http.guards import GuardedController, needs
from entrypoints.http.job_routes import parse_id
from entrypoints.http.list_params import invalid_parameter
from entrypoints.roles import ApiServices, ConsoleServices

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
ASSETS = HERE / "static"
PAGE_SIZE = 25
LIST_SIZE = 50
"""Connections and checkpoints per page."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'{issuer}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""No inline script or style anywhere; the page talks to the API and, to sign in, to the
issuer."""


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def console_headers(services: ApiServices) -> dict[str, str]:
    sign_in = services.console.sign_in if services.console is not None else None
    issuer = f" {_origin(sign_in.issuer)}" if sign_in is not None else ""
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY.format(issuer=issuer),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def _page(services: ApiServices) -> Template:
    sign_in = services.console.sign_in if services.console is not None else None
    return Template(
        template_name="page.html",
        context={
            "version": services.version,
            "auth": "oidc" if sign_in is not None else "none",
            "secured": services.security.enabled,
            "issuer": sign_in.issuer if sign_in else "",
            "client_id": sign_in.client_id if sign_in else "",
        },
        headers=console_headers(services),
    )


@get("/console", include_in_schema=False, sync_to_thread=False)
def console_page(services: NamedDependency[ApiServices]) -> Template:
    """The page: its own script loads each view as a fragment, with the token it holds."""
    return _page(services)


@get("/console/{view:path}", include_in_schema=False, sync_to_thread=False)
def console_view(services: NamedDependency[ApiServices], view: FromPath[str]) -> Template:
    del view  # the script reads the address and asks for its fragment
    return _page(services)


CONSOLE_ASSETS = create_static_files_router(
    path="/console-assets",
    directories=[ASSETS],
    include_in_schema=False,
    name="console-assets",
    cache_control=None,
)


def _console(services: ApiServices) -> ConsoleServices:
    if services.console is None:
        raise FetcherError(entry=catalogue.NOT_FOUND)
    return services.console


def _fragment(name: str, services: ApiServices, **context: Any) -> Template:
    return Template(template_name=name, context=context, headers=console_headers(services))


def _query(request: Request[Any, Any, Any], name: str) -> str | None:
    value: str | None = request.query_params.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _moment(raw: str | None, name: str) -> datetime | None:
    """A time from a filter: an RFC 3339 time, or a ``datetime-local`` field's value (UTC)."""
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise invalid_parameter(name) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _cursor(raw: str | None) -> tuple[datetime, UUID] | None:
    if raw is None:
        return None
    moment, _, job_id = raw.rpartition("_")
    parsed = _moment(moment, "older")
    if parsed is None:
        return None
    return parsed, parse_id(job_id, "job")


class ConsoleController(GuardedController):
    path = "/v1/console"
    include_in_schema = False

    @get("/jobs", opt=needs(Permission.FETCHER_GET))
    async def jobs(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
    ) -> Template:
        console = _console(services)
        status = _query(request, "status")
        if status is not None and status not in JOB_STATUSES:
            raise invalid_parameter("status")
        search = JobSearch(
            tenant=tenant,
            status=status,
            source=_query(request, "source"),
            config_name=_query(request, "config"),
            created_from=_moment(_query(request, "from"), "from"),
            created_until=_moment(_query(request, "until"), "until"),
            older_than=_cursor(_query(request, "older")),
            limit=PAGE_SIZE + 1,
        )
        found = await console.search_jobs(search)
        page, more = found[:PAGE_SIZE], len(found) > PAGE_SIZE
        filters = {
            name: request.query_params.get(name, "")
            for name in ("status", "source", "config", "from", "until")
        }
        older = None
        if more:
            last = page[-1].summary
            older = f"{rfc3339nano(last.created_at)}_{last.job_id}"
        running = any(item.summary.status in ("pending", "processing") for item in page)
        return _fragment(
            "jobs.html",
            services,
            jobs=page,
            filters=filters,
            statuses=JOB_STATUSES,
            older=older,
            next_query=_with(filters, older=older) if older else "",
            refresh=running,
            timefmt=rfc3339nano,
        )

    @get("/jobs/{job_id:str}", opt=needs(Permission.FETCHER_GET))
    async def job(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        job_id: FromPath[str],
    ) -> Template:
        reading = await services.get_job.with_progress(parse_id(job_id, "job"), tenant=tenant)
        job = reading.job
        return _fragment(
            "job.html",
            services,
            job=job,
            request_json=json.dumps(
                {
                    "mappedFields": thaw(job.request.mapped_fields),
                    "filters": thaw(job.request.filters),
                    "metadata": thaw(job.request.metadata),
                },
                indent=2,
                ensure_ascii=False,
                default=str,
            ),
            progress=reading.progress,
            failure=explain_failure(job.error) if job.error else None,
            refresh=job.status in ("pending", "processing"),
            timefmt=rfc3339nano,
        )

    @get("/jobs/{job_id:str}/history", opt=needs(Permission.FETCHER_HISTORY))
    async def history(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        job_id: FromPath[str],
    ) -> Template:
        parsed = parse_id(job_id, "job")
        entries = await services.get_job_history(parsed, tenant=tenant)
        return _fragment(
            "history.html",
            services,
            job_id=parsed,
            entries=entries,
            timefmt=rfc3339nano,
        )

    @post("/jobs/{job_id:str}/verify", opt=needs(Permission.FETCHER_HISTORY), status_code=200)
    async def verify(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        job_id: FromPath[str],
    ) -> Template:
        parsed = parse_id(job_id, "job")
        console = _console(services)
        if console.verify_job is None:
            await services.get_job(parsed, tenant=tenant)  # the caller's job, or 404
            return _fragment("proof.html", services, proof=None)
        proof = await console.verify_job(parsed, tenant=tenant)
        return _fragment("proof.html", services, proof=proof, valid=SignatureCheck.VALID)

    @get("/connections", opt=needs(Permission.CONNECTIONS_GET))
    async def connections(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
    ) -> Template:
        page = _page_number(request)
        wanted = ListFilter(page=page, limit=LIST_SIZE)
        found = await services.connections.list(wanted, tenant=tenant)
        return _fragment(
            "connections.html",
            services,
            connections=found.items,
            total=found.total,
            page=page,
            more=page * LIST_SIZE < found.total,
        )

    @post(
        "/connections/{connection_id:str}/test",
        opt=needs(Permission.CONNECTIONS_POST),
        status_code=200,
    )
    async def test_connection(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
    ) -> Template:
        result = await services.connections.check(
            parse_id(connection_id, "connection"), tenant=tenant
        )
        return _fragment("connection_test.html", services, latency_ms=result.latency_ms)

    @get("/connections/{connection_id:str}/schema", opt=needs(Permission.CONNECTIONS_GET))
    async def schema(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        connection_id: FromPath[str],
    ) -> Template:
        found = await services.connections.schema(
            parse_id(connection_id, "connection"), tenant=tenant
        )
        return _fragment("schema.html", services, schema=found)

    @get("/checkpoints", opt=needs(Permission.FETCHER_HISTORY))
    async def checkpoints(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
    ) -> Template:
        del tenant  # resolved for its checks, as the API's checkpoint route does
        after = _count(_query(request, "after"))
        found = []
        if services.list_checkpoints is not None:
            found = await services.list_checkpoints(
                after=after, limit=LIST_SIZE, with_heads=not services.tenancy.multi_tenant
            )
        keys = services.console.checkpoint_keys if services.console is not None else None
        rows = [
            (
                checkpoint,
                keys.check(checkpoint.key_id, checkpoint.message(), checkpoint.signature)
                if keys is not None
                else None,
            )
            for checkpoint in found
        ]
        exportable = (
            services.console is not None
            and services.console.export_bundle is not None
            and not services.tenancy.multi_tenant
        )
        return _fragment(
            "checkpoints.html",
            services,
            rows=rows,
            after=after,
            next_after=found[-1].position if len(found) == LIST_SIZE else None,
            valid=SignatureCheck.VALID,
            exportable=exportable,
        )

    @get("/bundle", opt=needs(Permission.FETCHER_HISTORY))
    async def bundle(
        self,
        services: NamedDependency[ApiServices],
        tenant: NamedDependency[Tenant],
        request: Request[Any, Any, Any],
    ) -> Stream:
        del tenant
        console = _console(services)
        if services.tenancy.multi_tenant:
            # A bundle holds every tenant's records: only a single-tenant deployment exports.
            raise PermissionDenied()
        if console.export_bundle is None:
            raise FetcherError(entry=catalogue.NOT_FOUND)  # no audit trail to export
        since = _moment(_query(request, "since"), "since")
        until = _moment(_query(request, "until"), "until")
        exported_at = rfc3339nano(datetime.now(UTC))
        lines = console.export_bundle(since, until, exported_at)

        async def body() -> AsyncIterator[bytes]:
            async for line in lines:
                yield (line + "\n").encode()

        return Stream(
            body(),
            media_type="application/x-ndjson",
            headers={
                "Content-Disposition": 'attachment; filename="fetcher-audit-bundle.jsonl"',
                **console_headers(services),
            },
        )


def _with(filters: Mapping[str, str], **more: str | None) -> str:
    pairs = {k: v for k, v in {**filters, **more}.items() if v}
    return urlencode(pairs)


def _count(raw: str | None) -> int:
    if raw is None:
        return 0
    if not (raw.isascii() and raw.isdigit()):
        raise invalid_parameter("after")
    return int(raw)


def _page_number(request: Request[Any, Any, Any]) -> int:
    raw = request.query_params.get("page", "1")
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise invalid_parameter("page")
    return int(raw)


CONSOLE_ROUTES: list[ControllerRouterHandler] = [
    console_page,
    console_view,
    CONSOLE_ASSETS,
    ConsoleController,
]
