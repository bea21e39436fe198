"""``fetcher healthcheck``: asks the local process's ``/health`` (the image's HEALTHCHECK).

One image runs every role, so the check asks both places a role answers, on the host each
role binds: the API's ``SERVER_ADDRESS``, and ``HEALTH_PORT`` (4007) on the host of
``SERVER_ADDRESS``, where ``worker`` and ``relay`` answer. A wildcard host (``0.0.0.0``, ``::``,
``:port``) is asked on its loopback; a specific one (a pod IP, ``[::1]``, a name) as it is, so
the check finds the role wherever it listens. Healthy when either answers 200.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping

from entrypoints.cli.commands import Commands, command
from entrypoints.settings import Environment, SettingsError, listen_address

DEFAULT_HEALTH_PORT = 4007
TIMEOUT_SECONDS = 3.0
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def _url(host: str, port: int) -> str:
    host = _WILDCARDS.get(host, host)
    if ":" in host:  # IPv6, bracketed; a zone (fe80::1%eth0) percent-encoded as URLs want
        return f"http://[{host.replace('%', '%25')}]:{port}/health"
    return f"http://{host}:{port}/health"


def _health_port(raw: str) -> int:
    """As the reference reads ``HEALTH_PORT``: anything but 1-65535 means 4007."""
    value = int(raw) if raw.strip().isdigit() else 0
    return value if 0 < value < 65536 else DEFAULT_HEALTH_PORT


def local_health_urls(env: Mapping[str, str] | None = None) -> list[str]:
    """Where the local role answers ``/health`` (from ``env``, the process environment by
    default): the API's address, then the health port on the same host (the address
    ``worker`` and ``relay`` bind, ``entrypoints.runners``)."""
    read = Environment(env)
    health_port = _health_port(read.raw("HEALTH_PORT") or "")
    try:
        host, port = listen_address(read)
    except SettingsError:
        return [_url("127.0.0.1", health_port)]
    return [_url(host, port), _url(host, health_port)]


def _healthy(url: str) -> str | None:
    """``None`` when ``url`` answers 200, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            status: int = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return f"{url}: {reason}"
    return None if status == 200 else f"{url}: HTTP {status}"


def _healthcheck(args: argparse.Namespace) -> int:
    failures = []
    for url in args.url or local_health_urls():
        failure = _healthy(url)
        if failure is None:
            print(f"healthy: {url}")
            return 0
        failures.append(failure)
    print(f"unhealthy: {'; '.join(failures)}", file=sys.stderr)
    return 1


def add_healthcheck_command(subparsers: Commands) -> None:
    parser = command(
        subparsers,
        "healthcheck",
        _healthcheck,
        help="exit 0 when the local fetcher process answers /health with 200",
        description="Ask the local process's /health: at SERVER_ADDRESS (api, serve) and at "
        "HEALTH_PORT on the host of SERVER_ADDRESS (worker, relay; default 4007), a wildcard "
        "host on its loopback. Exit 0 when one answers 200, else 1. The container image's "
        "HEALTHCHECK.",
    )
    parser.add_argument(
        "--url", action="append", metavar="URL", help="ask this URL instead (repeatable)"
    )
