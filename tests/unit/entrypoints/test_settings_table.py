"""The one table of settings: how each type is read, what a bad value says, aliases, the roles
that need a setting, and the files generated from the table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from entrypoints.cli.settings_docs import ENV_EXAMPLE_PATH, MARKDOWN_PATH, env_example, markdown
from entrypoints.cli.settings_help import settings_epilog
from entrypoints.settings import KeySettings, Settings, SettingsError
from entrypoints.settings_reader import Environment, check_required, missing_for
from entrypoints.settings_table import (
    GROUP_TITLES,
    GROUPS,
    ROLES,
    SETTINGS,
    SETTINGS_BY_NAME,
    SHARED_ROLES,
)

ROOT = Path(__file__).resolve().parents[3]
MASTER_B64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
OLD_MASTER_B64 = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="


@pytest.mark.parametrize(
    ("raw", "value"),
    [("", 20), (" 45 ", 45), ("4", 4), ("1e2", 100)],
)
def test_an_integer_is_converted_with_its_default_and_bounds(raw, value):
    assert Environment({"FETCHER_LEASE_SECONDS": raw}).integer("FETCHER_LEASE_SECONDS") == value


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("FETCHER_LEASE_SECONDS", "3", "FETCHER_LEASE_SECONDS must be an integer of at least 4"),
        ("FETCHER_LEASE_SECONDS", "soon", "must be an integer of at least 4, got 'soon'"),
        ("RABBITMQ_NUMBERS_OF_WORKERS", "0", "must be a positive integer, got '0'"),
        ("RABBITMQ_NUMBERS_OF_WORKERS", "2.5", "must be a positive integer, got '2.5'"),
        ("FETCHER_AUTH_LEEWAY_SECONDS", "301", "must be an integer between 0 and 300"),
        (
            "CONNECTION_CHECK_CACHE_SECONDS",
            "-1",
            "CONNECTION_CHECK_CACHE_SECONDS must be a number of seconds between 0 and 3600, "
            "got '-1'",
        ),
        ("MULTI_TENANT_ENABLED", "maybe", "must be a boolean (true/false), got 'maybe'"),
        ("OTEL_TRACES_EXPORTER", "zipkin", "must be one of otlp, console, none, got 'zipkin'"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_was_expected(name, raw, message):
    with pytest.raises(SettingsError, match=re.escape(message)) as raised:
        Settings.from_env({name: raw})
    assert raised.value.problems == (str(raised.value),)
    assert str(raised.value).startswith(name)


def test_a_number_of_seconds_takes_fractions():
    env = Environment({"CONNECTION_LOOKUP_CACHE_SECONDS": "0.25"})
    assert env.number("CONNECTION_LOOKUP_CACHE_SECONDS") == 0.25
    assert Environment({}).number("CONNECTION_LOOKUP_CACHE_SECONDS") == 2.0


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("true", True), ("TRUE", True), ("1", True), ("t", True), ("yes", True), ("on", True),
        ("false", False), ("False", False), ("0", False), ("f", False), ("no", False),
        ("off", False),
    ],
)  # fmt: skip
def test_booleans_take_the_references_spellings(raw, value):
    assert Environment({"MULTI_TENANT_ENABLED": raw}).flag("MULTI_TENANT_ENABLED") is value


def test_an_unset_boolean_is_its_default_or_the_one_given():
    env = Environment({})
    assert env.flag("MULTI_TENANT_ENABLED") is False
    assert env.maybe_flag("ENABLE_TELEMETRY") is None
    assert env.flag("OBJECT_STORAGE_USE_PATH_STYLE", default=True) is True


def test_lists_and_texts_are_stripped_and_defaulted():
    env = Environment({"FETCHER_AUTH_AUDIENCE": " a, ,b ,", "OBJECT_STORAGE_REGION": "  "})
    assert env.listed("FETCHER_AUTH_AUDIENCE") == ("a", "b")
    assert env.text("OBJECT_STORAGE_REGION") == "us-east-1"
    assert env.optional("OBJECT_STORAGE_BUCKET") is None


def test_a_variable_missing_from_the_table_cannot_be_read():
    with pytest.raises(KeyError):
        Environment({"NOT_A_SETTING": "1"}).raw("NOT_A_SETTING")


def test_the_references_alias_is_read_when_the_name_is_unset():
    alias = {"OTEL_RESOURCE_SERVICE_NAME": "fetcher-ledger"}
    assert Settings.from_env(alias).tracing.service_name == "fetcher-ledger"
    both = {**alias, "OTEL_SERVICE_NAME": "fetcher-api"}
    assert Settings.from_env(both).tracing.service_name == "fetcher-api"
    assert SETTINGS_BY_NAME["OTEL_SERVICE_NAME"].aliases == ("OTEL_RESOURCE_SERVICE_NAME",)


def test_the_deployed_roles_need_the_shared_settings_and_serve_needs_none():
    needed = {role: {s.name for s in SETTINGS if role in s.required_for} for role in ROLES}
    shared = {"FETCHER_DATABASE_URL", "RABBITMQ_URL", "APP_ENC_KEY"}
    assert needed == {
        "serve": set(),
        "api": shared,
        "worker": shared | {"OBJECT_STORAGE_BUCKET"},
        "relay": shared,
    }
    assert missing_for("serve", {}) == ()
    Settings.from_env({}, role="serve")


def test_every_missing_setting_is_one_problem_with_an_example():
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"RABBITMQ_URL": "amqp://rabbit/"}, role="worker")
    assert [problem.split(" ", 1)[0] for problem in raised.value.problems] == [
        "FETCHER_DATABASE_URL",
        "OBJECT_STORAGE_BUCKET",
        "APP_ENC_KEY",
    ]
    assert all("is required by `fetcher worker`" in p for p in raised.value.problems)
    assert "e.g. OBJECT_STORAGE_BUCKET=fetcher-results" in raised.value.problems[1]
    check_required("worker", {s.name: s.example for s in SETTINGS if s.required_for})


def test_the_table_is_consistent():
    names = [setting.name for setting in SETTINGS]
    assert len(names) == len(set(names))
    for setting in SETTINGS:
        assert setting.group in GROUP_TITLES, setting.name
        assert setting.roles, setting.name
        assert setting.required_for <= setting.roles, setting.name
        assert not setting.required_for or setting.example, setting.name
        if setting.kind in ("int", "number") and setting.reader == "fetcher":
            assert isinstance(setting.default, int | float), setting.name
            low, high = setting.minimum, setting.maximum
            assert low is None or setting.default >= low, setting.name
            assert high is None or setting.default <= high, setting.name
        if setting.name.startswith("OTEL_"):
            assert setting.group == "tracing", setting.name


def test_secrets_are_marked():
    secrets = {setting.name for setting in SETTINGS if setting.secret}
    assert {
        "APP_ENC_KEY",
        "APP_ENC_KEYS_PREVIOUS",
        "FETCHER_DATABASE_URL",
        "RABBITMQ_URL",
        "OBJECT_STORAGE_SECRET_KEY",
        "FETCHER_AUTH_HS256_SECRET",
        "FETCHER_AUDIT_SIGNING_KEY",
    } <= secrets


@pytest.mark.parametrize("role", SHARED_ROLES)
def test_help_lists_the_required_settings_first_then_by_concern_tracing_last(role):
    text = settings_epilog(role)
    headings = [line for line in text.splitlines() if line and not line.startswith(" ")][1:]
    assert (
        headings[0] == f"required by `fetcher {role}` (only `fetcher serve` has embedded defaults):"
    )
    titles = [group.title + ":" for group in GROUPS]
    assert headings[1:] == [title for title in titles if title in headings[1:]]
    assert headings[-1] == "Tracing (OpenTelemetry):"
    required = text.split("\n\n")[1]
    for name in ("FETCHER_DATABASE_URL", "RABBITMQ_URL", "APP_ENC_KEY"):
        assert re.search(rf"^  {name} +\(required\)", required, re.MULTILINE)
        assert text.count(f"  {name} ") == 1
    assert "[read by the OpenTelemetry SDK]" in text


def test_the_key_ring_comes_from_the_key_settings():
    keys = KeySettings.from_env(
        {
            "APP_ENC_KEY": MASTER_B64,
            "APP_ENC_KEY_VERSION": "3",
            "APP_ENC_KEYS_PREVIOUS": f"2:{OLD_MASTER_B64}",
        }
    )
    assert keys.ring().versions() == ("3", "2")
    assert KeySettings.from_env({"APP_ENC_KEY": MASTER_B64}).ring().versions() == ("1",)


def test_the_configuration_reference_is_generated_from_the_table():
    """Run `fetcher settings --write` after changing the table."""
    assert (ROOT / MARKDOWN_PATH).read_text() == markdown()
    page = markdown()
    for setting in SETTINGS:
        assert f"| `{setting.name}` |" in page


def test_the_env_example_is_generated_from_the_table_and_starts_every_role():
    """Run `fetcher settings --write` after changing the table."""
    text = (ROOT / ENV_EXAMPLE_PATH).read_text()
    assert text == env_example()
    values = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    for role in SHARED_ROLES:
        check_required(role, values)
    assert values["APP_ENC_KEY"] == "CHANGE-ME"
    Settings.from_env(values)
