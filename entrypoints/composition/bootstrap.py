"""``bootstrap``: the roles a process runs, wired on the infrastructure they share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection

from application.readiness import Check, Dependency
from entrypoints.composition.api import api_role
from entrypoints.composition.infrastructure import open_broker_probe, open_infrastructure
from entrypoints.composition.overrides import NO_OVERRIDES, Overrides
from entrypoints.composition.readiness import (
    broker_dependency,
    database_dependency,
    probes_of,
    process_metrics,
    routing_dependency,
    storage_dependency,
)
from entrypoints.composition.relay import relay_role
from entrypoints.composition.security import open_http_security
from entrypoints.composition.worker import open_worker, worker_lookups
from entrypoints.roles import ALL_ROLES, ApiServices, Fetcher, Relay, Role, Worker
from entrypoints.settings import Settings


@contextlib.asynccontextmanager
async def bootstrap(
    settings: Settings,
    *,
    roles: Collection[Role] = ALL_ROLES,
    overrides: Overrides = NO_OVERRIDES,
) -> AsyncIterator[Fetcher]:
    """Opens what ``roles`` need from ``settings``, wires those roles, closes it all at exit.

    ``overrides`` replace the adapters (or values) bootstrap would build, so tests swap
    adapters without wiring use cases themselves; bootstrap closes only what it opened.
    ``roles`` also decides what is opened at all: only the worker opens result storage, the
    API alone no work queue. Readiness checks what was opened; the metrics registry (one for
    the process) is given to every use case and policy that counts its work. The API's
    security (token verifier, authoriser) is opened here too; the refusals at start
    (``check_http_security``) are the runner's, made before it waits for anything.
    """
    roles = frozenset(roles)
    metrics = process_metrics(roles) if overrides.metrics is None else overrides.metrics
    async with contextlib.AsyncExitStack() as stack:
        infra = await open_infrastructure(stack, settings, roles, overrides, metrics)
        relay: Relay | None = None
        if infra.publishers is not None:
            relay = relay_role(infra, infra.publishers)
        lookups = worker_lookups(infra) if Role.WORKER in roles else None
        worker: Worker | None = None
        if Role.WORKER in roles:
            worker = await open_worker(stack, infra, overrides, lookups, relay)

        dependencies: list[Dependency] = [database_dependency(settings, infra.events.store.check)]
        broker_checks: list[Check] = []
        if infra.publishers is not None:
            broker_checks = [infra.publishers.work_queue.check, infra.publishers.events.check]
        else:
            probe = await stack.enter_async_context(open_broker_probe(settings))
            broker_checks = [probe.check] if probe is not None else []
        broker = broker_dependency(settings, *broker_checks)
        if broker is not None:
            dependencies.append(broker)
        if infra.unroutable is not None:
            dependencies.append(routing_dependency(infra.unroutable))
        if worker is not None and infra.storage is not None:
            dependencies.append(storage_dependency(settings, infra.storage.check))
        probes = probes_of(settings, dependencies, metrics)

        api: ApiServices | None = None
        if Role.API in roles:
            security = overrides.security
            if security is None:
                security = await stack.enter_async_context(open_http_security(settings))
            api = api_role(infra, overrides, security, probes, lookups, relay)
        yield Fetcher(api=api, worker=worker, relay=relay, probes=probes)
