"""Connection settings: internal datasources from the environment, cache, guard, pagination."""

from __future__ import annotations

import pytest

from domain.connection import DatabaseType
from entrypoints.composition.infrastructure import internal_connection
from entrypoints.settings import Settings, SettingsError

LEDGER = {
    "DATASOURCE_LEDGER_CONFIG_NAME": "ledger_main",
    "DATASOURCE_LEDGER_TYPE": "postgresql",
    "DATASOURCE_LEDGER_HOST": "10.0.0.7",
    "DATASOURCE_LEDGER_DATABASE": "ledger",
    "DATASOURCE_LEDGER_USER": "reader",
    "DATASOURCE_LEDGER_PASSWORD": " pass with spaces @:/?# ",
    "DATASOURCE_LEDGER_SSLMODE": "verify-full",
    "DATASOURCE_LEDGER_SSL_CA": "-----BEGIN CERTIFICATE-----",
    "DATASOURCE_LEDGER_OPTIONS": "authSource=admin&directConnection=true",
}


def test_connection_settings_have_the_reference_defaults():
    options = Settings.from_env({}).connections
    assert options.schema_cache_ttl_seconds == 300 and not options.ssrf_guard
    assert options.check_cache_seconds == 5.0
    assert options.lookup_cache_seconds == 2.0
    assert (options.max_pagination_limit, options.max_pagination_months) == (100, 1)
    assert options.internal == ()


def test_connection_settings_are_read_from_the_environment():
    options = Settings.from_env(
        {
            "SCHEMA_CACHE_TTL_SECONDS": "60",
            "FETCHER_SSRF_GUARD": "true",
            "MAX_PAGINATION_LIMIT": "500",
            "MAX_PAGINATION_MONTH_DATE_RANGE": "6",
            "CONNECTION_CHECK_CACHE_SECONDS": "0.5",
            "CONNECTION_LOOKUP_CACHE_SECONDS": "0",
        }
    ).connections
    assert options.lookup_cache_seconds == 0
    assert (options.schema_cache_ttl_seconds, options.ssrf_guard) == (60, True)
    assert options.check_cache_seconds == 0.5
    assert (
        Settings.from_env({"CONNECTION_CHECK_CACHE_SECONDS": "0"}).connections.check_cache_seconds
        == 0
    )
    assert (options.max_pagination_limit, options.max_pagination_months) == (500, 6)


def test_pool_schema_and_server_json_settings_are_read_from_the_environment():
    defaults = Settings.from_env({}).connections
    assert (defaults.pool_size, defaults.pool_idle_seconds) == (4, 60)
    assert (defaults.worker_schema_ttl_seconds, defaults.server_json) == (10, False)
    assert defaults.worker_lookup_cache_seconds == 1.0
    options = Settings.from_env(
        {
            "FETCHER_DATASOURCE_POOL_SIZE": "0",
            "FETCHER_DATASOURCE_POOL_IDLE_SECONDS": "5",
            "FETCHER_WORKER_SCHEMA_TTL_SECONDS": "0",
            "FETCHER_PG_SERVER_JSON": "true",
            "FETCHER_WORKER_CONNECTION_CACHE_SECONDS": "0",
        }
    ).connections
    assert options.worker_lookup_cache_seconds == 0
    assert (options.pool_size, options.pool_idle_seconds) == (0, 5)
    assert (options.worker_schema_ttl_seconds, options.server_json) == (0, True)


def test_internal_datasources_take_any_config_name():
    (ledger,) = Settings.from_env(LEDGER).connections.internal
    assert ledger.config_name == "ledger_main" and ledger.type is DatabaseType.POSTGRESQL
    assert (ledger.host, ledger.port, ledger.database, ledger.user) == (
        "10.0.0.7",
        5432,
        "ledger",
        "reader",
    )
    assert ledger.password == " pass with spaces @:/?# "
    assert ledger.options == {"authSource": "admin", "directConnection": "true"}
    assert "pass with" not in repr(ledger) and "CERTIFICATE" not in repr(ledger)
    connection = internal_connection(ledger)
    assert connection.internal and connection.product_name == ""
    assert str(connection.id) == "3c5e86d5-cd85-5490-ba98-23a1f370f81e"
    assert connection.ssl.mode == "verify-full" and connection.password is None
    credentials = connection.internal_credentials
    assert credentials.password == " pass with spaces @:/?# "
    assert credentials.ssl_ca == "-----BEGIN CERTIFICATE-----"
    assert "pass with" not in repr(connection) and "CERTIFICATE" not in repr(connection)
    assert "pass with" not in repr(credentials) and "CERTIFICATE" not in repr(credentials)


def test_several_internal_datasources_in_variable_order():
    env = dict(LEDGER)
    env.update(
        {
            "DATASOURCE_A_CONFIG_NAME": "crm",
            "DATASOURCE_A_TYPE": "MONGODB",
            "DATASOURCE_A_HOST": "mongo",
            "DATASOURCE_A_DATABASE": "crm",
            "DATASOURCE_B_CONFIG_NAME": "",
        }
    )
    names = [d.config_name for d in Settings.from_env(env).connections.internal]
    assert names == ["crm", "ledger_main"]
    assert Settings.from_env(env).connections.internal[0].port == 27017


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"DATASOURCE_LEDGER_TYPE": "db2"}, "DATASOURCE_LEDGER_TYPE"),
        ({"DATASOURCE_LEDGER_HOST": ""}, "DATASOURCE_LEDGER_HOST is required"),
        ({"DATASOURCE_LEDGER_DATABASE": " "}, "DATASOURCE_LEDGER_DATABASE is required"),
        ({"DATASOURCE_LEDGER_PORT": "x"}, "DATASOURCE_LEDGER_PORT"),
        ({"DATASOURCE_LEDGER_PORT": "70000"}, "DATASOURCE_LEDGER_PORT"),
        ({"DATASOURCE_LEDGER_SSLMODE": "true"}, "DATASOURCE_LEDGER_SSLMODE"),
        ({"DATASOURCE_LEDGER_CONFIG_NAME": "a b"}, "DATASOURCE_LEDGER_CONFIG_NAME"),
        ({"DATASOURCE_LEDGER_OPTIONS": "novalue"}, "DATASOURCE_LEDGER_OPTIONS"),
        ({"DATASOURCE_OTHER_CONFIG_NAME": "ledger_main"}, "configured twice"),
        ({"SCHEMA_CACHE_TTL_SECONDS": "0"}, "SCHEMA_CACHE_TTL_SECONDS"),
        ({"FETCHER_DATASOURCE_POOL_SIZE": "-1"}, "FETCHER_DATASOURCE_POOL_SIZE"),
        ({"FETCHER_DATASOURCE_POOL_IDLE_SECONDS": "0"}, "FETCHER_DATASOURCE_POOL_IDLE_SECONDS"),
        ({"FETCHER_WORKER_SCHEMA_TTL_SECONDS": "x"}, "FETCHER_WORKER_SCHEMA_TTL_SECONDS"),
        ({"FETCHER_PG_SERVER_JSON": "maybe"}, "FETCHER_PG_SERVER_JSON"),
        ({"MAX_PAGINATION_LIMIT": "lots"}, "MAX_PAGINATION_LIMIT"),
        ({"CONNECTION_CHECK_CACHE_SECONDS": "-1"}, "CONNECTION_CHECK_CACHE_SECONDS"),
        ({"CONNECTION_CHECK_CACHE_SECONDS": "soon"}, "CONNECTION_CHECK_CACHE_SECONDS"),
        ({"CONNECTION_LOOKUP_CACHE_SECONDS": "-1"}, "CONNECTION_LOOKUP_CACHE_SECONDS"),
        (
            {"FETCHER_WORKER_CONNECTION_CACHE_SECONDS": "61"},
            "FETCHER_WORKER_CONNECTION_CACHE_SECONDS",
        ),
        ({"FETCHER_SSRF_GUARD": "maybe"}, "FETCHER_SSRF_GUARD"),
    ],
)
def test_invalid_settings_name_the_variable(changes, fragment):
    env = dict(LEDGER)
    env.update(changes)
    if "DATASOURCE_OTHER_CONFIG_NAME" in changes:
        env.update(
            {
                "DATASOURCE_OTHER_TYPE": "postgresql",
                "DATASOURCE_OTHER_HOST": "h",
                "DATASOURCE_OTHER_DATABASE": "d",
            }
        )
    with pytest.raises(SettingsError, match=fragment) as caught:
        Settings.from_env(env)
    assert "pass with spaces" not in str(caught.value)


def test_the_crm_plugins_keys_are_read_and_never_shown():
    options = Settings.from_env(
        {
            "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM": "hash secret ✓",
            "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM": "00" * 16 + "ff" * 16,
        }
    ).connections
    assert options.crm_keys.hash_key == "hash secret ✓".encode()
    assert options.crm_keys.encrypt_key == bytes(16) + b"\xff" * 16
    assert "hash secret" not in repr(options) and "ffff" not in repr(options)
    assert Settings.from_env({}).connections.crm_keys.hash_key is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("zz" * 16, "must be hexadecimal"), ("ab" * 20, "got 40 digits")],
)
def test_a_crm_encryption_key_that_is_not_an_aes_key_is_refused(value: str, expected: str):
    with pytest.raises(SettingsError, match=expected) as caught:
        Settings.from_env({"CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM": value})
    assert value not in str(caught.value)
