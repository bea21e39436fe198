"""``fetcher broker``: the reference topology, written out as RabbitMQ definitions for any
virtual host, or declared on the broker of ``RABBITMQ_URL``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from domain.errors import FetcherError
from entrypoints.cli.check import shown_url, vhost_of
from entrypoints.cli.commands import Commands, command, group
from entrypoints.settings import Settings, SettingsError


def _settings() -> Settings | None:
    try:
        return Settings.from_env()
    except SettingsError as error:
        print(f"fetcher: configuration error: {error}", file=sys.stderr)
        return None


def _definitions(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings is None:
        return 2
    url = settings.broker.url
    vhost = args.vhost or (vhost_of(url) if url else "/")
    from entrypoints.composition.infrastructure import broker_topology

    json.dump(broker_topology(settings).definitions(vhost), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _declare(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings is None:
        return 2
    url = settings.broker.url
    if url is None:
        print("fetcher: configuration error: RABBITMQ_URL is required", file=sys.stderr)
        return 2
    try:
        from entrypoints.composition.infrastructure import broker_topology

        asyncio.run(broker_topology(settings).apply(url))
    except FetcherError as error:
        print(f"fetcher: {error.message} ({shown_url(url)})", file=sys.stderr)
        return 1
    print(f"declared the topology on vhost '{vhost_of(url)}' of {shown_url(url)}")
    return 0


def add_broker_commands(subparsers: Commands) -> None:
    actions = group(
        subparsers,
        "broker",
        help="the broker topology: definitions for any vhost, or declare it",
        description="The reference topology (work queue with its dead-letter exchange and "
        "queue, the events exchange, the two example event queues bound to it), with the "
        "names of RABBITMQ_FETCHER_WORK_QUEUE and RABBITMQ_JOB_EVENTS_EXCHANGE.",
    )
    definitions = command(
        actions,
        "definitions",
        _definitions,
        help="print the topology as RabbitMQ definitions (JSON)",
        description="Print the topology as RabbitMQ definitions for a virtual host, for "
        "`rabbitmqctl import_definitions FILE`, the management UI or load_definitions.",
    )
    definitions.add_argument(
        "--vhost", help="the virtual host (default: that of RABBITMQ_URL, else '/')"
    )
    command(
        actions,
        "declare",
        _declare,
        help="declare the topology on the vhost of RABBITMQ_URL (idempotent)",
        description="Declare the topology on the virtual host of RABBITMQ_URL, as a role "
        "does at start with FETCHER_BROKER_DECLARE_TOPOLOGY=true (the user needs the "
        "configure permission there).",
    )
