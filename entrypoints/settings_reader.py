"""The typed reader every settings ``from_env`` reads through, and the required-settings check.

Parsing goes through msgspec (``msgspec.convert(..., strict=False)`` turns the text into an
integer, a number or a boolean and checks the table's bounds) rather than pydantic-settings:
msgspec is already a dependency of the HTTP layer, and the settings objects stay the plain
frozen dataclasses the rest of the code reads, so pydantic would be a second validation library
for the same job. What a type cannot say (rules across settings, URL shapes) stays in each
concern's ``from_env``, raising the one ``SettingsError``.

This is the one module that reads the process environment (``process_environment``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import msgspec

from entrypoints.settings_table import (
    DATASOURCE_KEY,
    DATASOURCE_SUFFIXES,
    SETTINGS_BY_NAME,
    Setting,
    SettingsError,
    required_for,
)


def process_environment() -> Mapping[str, str]:
    """The process environment: the one place it is read."""
    return os.environ


def _type(setting: Setting) -> Any:
    base: type = int if setting.kind == "int" else float
    meta = msgspec.Meta(ge=setting.minimum, le=setting.maximum)
    return Annotated[base, meta]


# Go's strconv.ParseBool (the reference's) accepts t/f; yes/no/on/off are accepted as before.
_BOOL_WORDS = {"t": "true", "yes": "true", "y": "true", "on": "true"} | {
    "f": "false", "no": "false", "n": "false", "off": "false"
}  # fmt: skip


class Environment:
    """The process environment (or a mapping given in tests) read through the table: every
    lookup names a declared setting, typed and bounded as declared, the default applied."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values: Mapping[str, str] = process_environment() if values is None else values

    @classmethod
    def of(cls, env: Mapping[str, str] | Environment | None) -> Environment:
        """``env`` itself when it is one already, else a reader of it."""
        return env if isinstance(env, Environment) else cls(env)

    def raw(self, name: str) -> str | None:
        """The stripped text of ``name`` (or of its first alias that is set); None if empty."""
        setting = SETTINGS_BY_NAME[name]
        for key in (setting.name, *setting.aliases):
            text = self.values.get(key, "").strip()
            if text:
                return text
        return None

    def text(self, name: str) -> str:
        raw = self.raw(name)
        if raw is not None:
            return raw
        default = SETTINGS_BY_NAME[name].default
        return default if isinstance(default, str) else ""

    def optional(self, name: str) -> str | None:
        return self.raw(name)

    def choice(self, name: str) -> str:
        """Lower-cased, one of the declared choices."""
        setting = SETTINGS_BY_NAME[name]
        raw = self.raw(name)
        if raw is None:
            return str(setting.default or "")
        if raw.lower() not in setting.choices:
            raise SettingsError(f"{name} must be {setting.expected}, got {raw!r}")
        return raw.lower()

    def integer(self, name: str) -> int:
        value = self._number(name)
        if not isinstance(value, int):
            raise TypeError(f"{name} is not declared as an integer")
        return value

    def number(self, name: str) -> float:
        return float(self._number(name))

    def _number(self, name: str) -> int | float:
        setting = SETTINGS_BY_NAME[name]
        raw = self.raw(name)
        if raw is None:
            default = setting.default
            if not isinstance(default, int | float) or isinstance(default, bool):
                raise TypeError(f"{name} declares no numeric default")
            return default
        try:
            value: int | float = msgspec.convert(raw, _type(setting), strict=False)
        except msgspec.ValidationError:
            raise SettingsError(f"{name} must be {setting.expected}, got {raw!r}") from None
        return value

    def flag(self, name: str, default: bool | None = None) -> bool:
        value = self.maybe_flag(name)
        if value is not None:
            return value
        if default is not None:
            return default
        return bool(SETTINGS_BY_NAME[name].default)

    def maybe_flag(self, name: str) -> bool | None:
        raw = self.raw(name)
        if raw is None:
            return None
        word = _BOOL_WORDS.get(raw.lower(), raw)
        try:
            value: bool = msgspec.convert(word, bool, strict=False)
        except msgspec.ValidationError:
            expected = SETTINGS_BY_NAME[name].expected
            raise SettingsError(f"{name} must be {expected}, got {raw!r}") from None
        return value

    def listed(self, name: str) -> tuple[str, ...]:
        """Comma-separated items, stripped, empty ones dropped."""
        raw = self.raw(name) or ""
        return tuple(item.strip() for item in raw.split(",") if item.strip())

    def datasource_prefixes(self) -> Iterator[tuple[str, str]]:
        """``(variable, prefix)`` of every ``DATASOURCE_<X>_CONFIG_NAME`` that is set, in
        variable-name order."""
        for variable in sorted(self.values):
            if (
                variable.startswith("DATASOURCE_")
                and variable.endswith(DATASOURCE_KEY)
                and len(variable) > len("DATASOURCE_") + len(DATASOURCE_KEY)
                and self.values[variable].strip()
            ):
                yield variable, variable.removesuffix(DATASOURCE_KEY)

    def datasource(self, prefix: str, suffix: str, *, strip: bool = True) -> str:
        """``<prefix>_<suffix>`` of an internal datasource (one of ``DATASOURCE_SUFFIXES``)."""
        if suffix not in DATASOURCE_SUFFIXES:
            raise KeyError(suffix)
        value = self.values.get(f"{prefix}_{suffix}", "")
        return value.strip() if strip else value

    def datasource_port(self, prefix: str, default: int) -> int:
        name = f"{prefix}_PORT"
        raw = self.datasource(prefix, "PORT")
        if not raw:
            return default
        try:
            port: int = msgspec.convert(raw, _PORT, strict=False)
        except msgspec.ValidationError:
            expected = "an integer between 1 and 65535"
            raise SettingsError(f"{name} must be {expected}, got {raw!r}") from None
        return port


_PORT = Annotated[int, msgspec.Meta(ge=1, le=65535)]


def missing_for(role: str, values: Mapping[str, str]) -> tuple[Setting, ...]:
    """The settings ``role`` cannot start without that ``values`` leaves empty."""
    env = Environment(values)
    return tuple(s for s in required_for(role) if env.raw(s.name) is None)


def missing_line(setting: Setting, role: str) -> str:
    return (
        f"{setting.name} is required by `fetcher {role}` ({setting.help}), "
        f"e.g. {setting.name}={setting.example}"
    )


def check_required(role: str, values: Mapping[str, str]) -> None:
    """Raises one ``SettingsError`` with a line per setting ``role`` lacks."""
    missing = missing_for(role, values)
    if missing:
        raise SettingsError(*(missing_line(setting, role) for setting in missing))
