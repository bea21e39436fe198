"""Multi-tenant settings: the mode, the allow-list, internal datasources' tenants, the SSRF
guard's default, and the API's refusal to trust unverified tenant claims."""

from __future__ import annotations

import logging

import pytest

from domain.tenant import SINGLE_TENANCY, Tenancy
from entrypoints.composition.security import (
    check_http_security,
    check_tenancy,
    open_http_security,
)
from entrypoints.settings import Settings, SettingsError

OIDC = {
    "FETCHER_AUTH_ISSUER": "https://sso.example.com/realms/fetcher",
    "FETCHER_AUTH_AUDIENCE": "fetcher-api",
    "FETCHER_AUTH_HS256_SECRET": "s" * 32,
}
MT = {"MULTI_TENANT_ENABLED": "true"}
LEDGER = {
    "DATASOURCE_LEDGER_CONFIG_NAME": "ledger",
    "DATASOURCE_LEDGER_TYPE": "postgresql",
    "DATASOURCE_LEDGER_HOST": "db.internal",
    "DATASOURCE_LEDGER_DATABASE": "ledger",
}


def test_single_tenant_is_the_default():
    settings = Settings.from_env({})
    assert not settings.tenancy.enabled and settings.tenancy.tenancy == SINGLE_TENANCY
    assert not settings.connections.ssrf_guard
    assert settings.connections.internal_visibility() is None


def test_multi_tenant_mode_with_an_allow_list():
    settings = Settings.from_env(
        {**MT, "MULTI_TENANT_ALLOWED_TENANTS": " tenant-a, tenant_b ,", **OIDC}
    )
    assert settings.tenancy.allowed == ("tenant-a", "tenant_b")
    assert settings.tenancy.tenancy == Tenancy.multi(["tenant-a", "tenant_b"])
    assert Settings.from_env(MT).tenancy.tenancy == Tenancy(True, None)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"MULTI_TENANT_ALLOWED_TENANTS": "tenant-a"},
            "MULTI_TENANT_ALLOWED_TENANTS needs MULTI_TENANT_ENABLED=true",
        ),
        (
            {**MT, "MULTI_TENANT_ALLOWED_TENANTS": "tenant-a,bad tenant"},
            "MULTI_TENANT_ALLOWED_TENANTS: 'bad tenant' is not a tenant id",
        ),
        (
            {**MT, "MULTI_TENANT_ALLOWED_TENANTS": "single-tenant"},
            "MULTI_TENANT_ALLOWED_TENANTS: 'single-tenant' is not a tenant id",
        ),
        ({"MULTI_TENANT_ENABLED": "maybe"}, "MULTI_TENANT_ENABLED must be a boolean"),
        (
            {**LEDGER, "DATASOURCE_LEDGER_TENANTS": "tenant-a,x/y"},
            "DATASOURCE_LEDGER_TENANTS: 'x/y' is not a tenant id",
        ),
    ],
)
def test_invalid_tenancy_settings_stop_start_up_naming_the_variable(env, message):
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)
    assert str(caught.value).startswith(message)


def test_the_ssrf_guard_is_on_by_default_in_multi_tenant_mode():
    assert Settings.from_env(MT).connections.ssrf_guard
    assert not Settings.from_env({**MT, "FETCHER_SSRF_GUARD": "false"}).connections.ssrf_guard
    assert Settings.from_env({"FETCHER_SSRF_GUARD": "true"}).connections.ssrf_guard


def test_internal_datasources_are_seen_by_the_tenants_they_list_in_multi_tenant_mode():
    listed = {**LEDGER, "DATASOURCE_LEDGER_TENANTS": "tenant-a, tenant-b"}
    assert Settings.from_env(listed).connections.internal_visibility() is None
    assert Settings.from_env({**MT, **listed}).connections.internal_visibility() == {
        "ledger": frozenset({"tenant-a", "tenant-b"})
    }
    assert Settings.from_env({**MT, **LEDGER}).connections.internal_visibility() == {
        "ledger": frozenset()
    }


def test_multi_tenant_mode_refuses_to_start_without_token_verification():
    for env in (MT, {**MT, "PLUGIN_AUTH_ENABLED": "true", "PLUGIN_AUTH_ADDRESS": "http://a:1"}):
        with pytest.raises(SettingsError) as caught:
            check_tenancy(Settings.from_env(env))
        assert str(caught.value).startswith(
            "MULTI_TENANT_ENABLED=true needs verified tokens, since the tenant is a token claim"
        )
        assert "\n" not in str(caught.value)
    check_tenancy(Settings.from_env({}))


async def test_multi_tenant_mode_with_verified_tokens_starts_and_says_how(caplog):
    caplog.set_level(logging.INFO, logger="fetcher")
    settings = Settings.from_env(
        {**MT, **OIDC, "MULTI_TENANT_ALLOWED_TENANTS": "tenant-a", "FETCHER_SSRF_GUARD": "false"}
    )
    check_http_security(settings)
    async with open_http_security(settings) as security:
        assert security.enabled
    assert "multi-tenant: each request runs as the tenant of claim 'tenantId'" in caplog.text
    assert "serving tenant-a" in caplog.text
    assert "FETCHER_SSRF_GUARD=false in multi-tenant mode" in caplog.text
    with pytest.raises(SettingsError):
        check_http_security(Settings.from_env(MT))
