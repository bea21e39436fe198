"""``fetcher healthcheck``: asks the local process's ``/health`` (the image's HEALTHCHECK).

One image runs every role, so the check asks both places a role answers: the API's
``SERVER_ADDRESS`` and the health port of ``worker`` and ``relay`` (``HEALTH_PORT``, 4007).
Healthy when either answers 200.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping

from entrypoints.settings import Environment, SettingsError, listen_address

DEFAULT_HEALTH_PORT = 4007
TIMEOUT_SECONDS = 3.0
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def _url(host: str, port: int) -> str:
    host = _WILDCARDS.get(host, host)
    return f"http://[{host}]:{port}/health" if ":" in host else f"http://{host}:{port}/health"


def _health_port(raw: str) -> int:
    """As the reference reads ``HEALTH_PORT``: anything but 1-65535 means 4007."""
    value = int(raw) if raw.strip().isdigit() else 0
    return value if 0 < value < 65536 else DEFAULT_HEALTH_PORT


def local_health_urls(env: Mapping[str, str] | None = None) -> list[str]:
    """From ``env``, the process environment by default."""
    read = Environment(env)
    urls = []
    try:
        urls.append(_url(*listen_address(read)))
    except SettingsError:
        pass
    urls.append(_url("127.0.0.1", _health_port(read.raw("HEALTH_PORT") or "")))
    return urls


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


def add_healthcheck_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    parser = subparsers.add_parser(
        "healthcheck",
        help="exit 0 when the local fetcher process answers /health with 200",
        description="Ask the local process's /health: at SERVER_ADDRESS (api, serve) and at "
        "127.0.0.1:HEALTH_PORT (worker, relay; default 4007). Exit 0 when one answers 200, "
        "else 1. The container image's HEALTHCHECK.",
    )
    parser.add_argument(
        "--url", action="append", metavar="URL", help="ask this URL instead (repeatable)"
    )
    parser.set_defaults(func=_healthcheck)
