"""The ``fetcher`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from domain.errors import FetcherError
from entrypoints.cli.audit import add_audit_commands
from entrypoints.cli.broker import add_broker_commands
from entrypoints.cli.check import add_check_command
from entrypoints.cli.commands import command
from entrypoints.cli.errors_docs import add_errors_command
from entrypoints.cli.healthcheck import add_healthcheck_command
from entrypoints.cli.settings_docs import add_settings_command
from entrypoints.cli.settings_help import settings_epilog
from entrypoints.cli.tools import add_tool_commands
from entrypoints.logs import configure_logging
from entrypoints.observability_settings import LogSettings
from entrypoints.settings import (
    UNKNOWN_VERSION,
    EventLoop,
    Settings,
    SettingsError,
    service_version,
)

Role = Callable[[Settings], Coroutine[Any, Any, None]]
log = logging.getLogger("fetcher")


def version_line() -> str:
    """``fetcher --version``: the service's one version (``VERSION``, else the package's)."""
    version = service_version()
    if version == UNKNOWN_VERSION:
        return f"fetcher {version} (not installed: run `make` or `pip install .`)"
    return f"fetcher {version}"


def _configuration_error(error: SettingsError) -> int:
    """One line per problem (every missing setting, or the first invalid one)."""
    for problem in error.problems:
        print(f"fetcher: configuration error: {problem}", file=sys.stderr)
    return 2


_USERINFO = re.compile(r"(\w+://)[^/@\s]*@")
_SECRET_PAIR = re.compile(r"\b(password|passwd|pwd|secret|token)\s*=\s*\S+", re.IGNORECASE)


def _one_line(text: str) -> str:
    text = _SECRET_PAIR.sub(r"\1=***", _USERINFO.sub(r"\1***@", text))
    return " ".join(text.split())[:400]


def _stopped(error: FetcherError) -> int:
    """A dependency failed the role (at start, most often: a database or broker that cannot
    be reached): one line with the innermost cause; the traceback at DEBUG."""
    log.debug("stopped by %s", type(error).__name__, exc_info=error)
    parts = [error.message]
    cause: BaseException | None = error.__cause__
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    if cause is not None and str(cause) and str(cause) not in error.message:
        parts.append(str(cause))
    print(f"fetcher: stopped: {_one_line(': '.join(parts))}", file=sys.stderr)
    return 1


def loop_factory(name: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the roles' event loop: uvloop's, or ``None`` for the standard one."""
    if name == "asyncio":
        return None
    import uvloop

    return uvloop.new_event_loop


def _run_role(role_name: str) -> Callable[[argparse.Namespace], int]:
    def run(_: argparse.Namespace) -> int:
        from entrypoints import runners

        role: Role = getattr(runners, role_name)
        try:
            settings = Settings.from_env(role=role_name)
            with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
                runner.run(role(settings))
        except SettingsError as error:
            return _configuration_error(error)
        except FetcherError as error:
            return _stopped(error)
        except KeyboardInterrupt:
            return 130
        return 0

    return run


ROLES = {
    "serve": "run API, dispatcher, worker and emitter in one process",
    "api": "run the HTTP API only",
    "worker": "run the extraction worker only",
    "relay": "run the event-log followers (work dispatch, job events)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetcher", description="Extracts data from databases as signed, encrypted jobs."
    )
    parser.add_argument("--version", action="version", version=version_line())
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in ROLES.items():
        command(
            commands,
            name,
            _run_role(name),
            help=help_text,
            description=f"{help_text[0].upper()}{help_text[1:]}.",
            epilog=settings_epilog(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    add_check_command(commands)
    add_broker_commands(commands)
    add_tool_commands(commands)
    add_settings_command(commands)
    add_errors_command(commands)
    add_healthcheck_command(commands)
    add_audit_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_logging(LogSettings.from_env())
    except SettingsError as error:
        return _configuration_error(error)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
