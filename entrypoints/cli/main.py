"""The ``fetcher`` command line."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from entrypoints.cli.tools import add_tool_commands
from entrypoints.logs import configure_logging
from entrypoints.observability_settings import LogSettings, ObservabilitySettingsError
from entrypoints.settings import Settings, SettingsError

Role = Callable[[Settings], Coroutine[Any, Any, None]]


def _run_role(role_name: str) -> Callable[[argparse.Namespace], int]:
    def run(_: argparse.Namespace) -> int:
        from entrypoints import runners

        role: Role = getattr(runners, role_name)
        try:
            settings = Settings.from_env()
            asyncio.run(role(settings))
        except SettingsError as error:
            print(f"fetcher: configuration error: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
        return 0

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetcher", description="Extracts data from databases as signed, encrypted jobs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    roles = {
        "serve": "run API, dispatcher, worker and emitter in one process",
        "api": "run the HTTP API only",
        "worker": "run the extraction worker only",
        "relay": "run the event-log followers (work dispatch, job events)",
    }
    for name, help_text in roles.items():
        commands.add_parser(name, help=help_text).set_defaults(func=_run_role(name))
    add_tool_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_logging(LogSettings.from_env(os.environ))
    except ObservabilitySettingsError as error:
        print(f"fetcher: configuration error: {error}", file=sys.stderr)
        return 2
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
