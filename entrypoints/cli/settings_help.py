"""The settings each role reads, as ``fetcher <role> --help`` lists them: the ones the role
cannot start without first (marked), then by concern, tracing last. Rendered from
``entrypoints.settings_table``."""

from __future__ import annotations

import textwrap

from entrypoints.settings_table import GROUPS, SETTINGS, Setting

__all__ = ["SETTINGS", "settings_epilog"]

_NAME_WIDTH = 36
_LINE_WIDTH = 100
_INDENT = " " * (_NAME_WIDTH + 4)


def _entry(setting: Setting, text: str) -> list[str]:
    head = f"  {setting.name:<{_NAME_WIDTH}}  "
    lines = []
    if len(setting.name) > _NAME_WIDTH:
        lines.append(f"  {setting.name}")
        head = _INDENT
    lines.extend(
        textwrap.wrap(
            text,
            width=_LINE_WIDTH,
            initial_indent=head,
            subsequent_indent=_INDENT,
            break_on_hyphens=False,
        )
    )
    return lines


def _described(setting: Setting) -> str:
    if setting.reader == "otel-sdk":
        return f"{setting.help} [read by the OpenTelemetry SDK]"
    return f"{setting.help} [default: {setting.default_text}]"


def settings_epilog(role: str) -> str:
    """The settings ``role`` reads, one entry each, for the end of its ``--help``."""
    lines = [
        "settings (environment variables; a bad value stops start-up with one line naming it):"
    ]
    read = [setting for setting in SETTINGS if role in setting.roles]
    required = [setting for setting in read if role in setting.required_for]
    if required:
        lines += ["", f"required by `fetcher {role}` (only `fetcher serve` has embedded defaults):"]
        for setting in required:
            lines += _entry(setting, f"(required) {setting.help}, e.g. {setting.example}")
    for group in GROUPS:
        entries = [s for s in read if s.group == group.key and s not in required]
        if entries:
            lines += ["", f"{group.title}:"]
            for setting in entries:
                lines += _entry(setting, _described(setting))
    return "\n".join(lines)
