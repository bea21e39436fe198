"""What the ``fetcher`` commands share: how a command and a group of commands are declared,
how a generated reference is written into a source tree, and where the keys commands take the
master key from."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeAlias

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""Where commands are added: ``fetcher``'s own, or a group's."""
Run: TypeAlias = Callable[[argparse.Namespace], int]
"""What a command does: ``func(args) -> exit code``."""


def command(
    commands: Commands, name: str, run: Run, *, help: str, **parser: Any
) -> argparse.ArgumentParser:
    """The command ``name`` that runs ``run``; ``parser``: the rest of its parser's arguments
    (its description, most often)."""
    added = commands.add_parser(name, help=help, **parser)
    added.set_defaults(func=run)
    return added


def group(
    commands: Commands,
    name: str,
    *,
    help: str,
    description: str | None = None,
    metavar: str = "ACTION",
) -> Commands:
    """The command ``name`` whose actions are commands of their own (``fetcher name ACTION``,
    ``metavar`` standing for the action in its usage)."""
    parser = commands.add_parser(name, help=help, description=description)
    return parser.add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)


def add_root_argument(parser: argparse.ArgumentParser) -> None:
    """``--root``: the source tree ``--write`` writes into."""
    parser.add_argument("--root", type=Path, default=Path(), help="source tree (default: .)")


def write_into(root: Path, documents: Iterable[tuple[Callable[[], str], Path]]) -> int:
    """Each document rendered into its path under ``root``, each file named as it is written."""
    for render, path in documents:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render())
        print(f"wrote {target}")
    return 0


def _stdin_first_line() -> str:
    stdin = sys.stdin
    try:
        if stdin is None or stdin.isatty():
            return ""
        return stdin.readline().strip()
    except (OSError, ValueError, UnicodeDecodeError):
        return ""


def master_key_text(master_key: str | None, flag: str | None) -> str:
    """The master key a keys command uses (reference §5.6): APP_ENC_KEY (``master_key``), else
    the first line of piped stdin, else the ``--key`` flag."""
    return master_key or _stdin_first_line() or (flag or "").strip()


def print_key(key: str, label: str, *, raw: bool) -> None:
    """A key a keys command prints: bare with ``--raw`` (``KEY=$(fetcher keys ... --raw)``),
    else after its label."""
    print(key if raw else f"{label}: {key}")
