"""Authentication settings and the safe defaults: a bad setting stops start-up naming it; the
API runs open only on loopback (saying so) or when switched off explicitly (warned)."""

from __future__ import annotations

import logging

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from adapters.auth.claims import ClaimPermissions
from adapters.auth.jwt_verifier import PyJwtTokenVerifier, UnverifiedClaimsReader
from adapters.auth.plugin import PluginAuthorizer
from entrypoints.composition.security import check_exposure, is_loopback, open_http_security
from entrypoints.settings import ASYMMETRIC_ALGORITHMS, Settings, SettingsError

ISSUER = "https://sso.example.com/realms/fetcher"
SECRET = "s" * 32
OIDC = {"FETCHER_AUTH_ISSUER": ISSUER, "FETCHER_AUTH_AUDIENCE": "fetcher-api"}


def test_defaults_configure_no_authentication_and_no_cors():
    security = Settings.from_env({}).security
    assert not security.enabled and not security.verifies_tokens
    assert security.cors_origins == ()
    assert (security.permissions_claim, security.tenant_claim) == ("scope", "tenantId")
    assert security.leeway_seconds == 30


def test_an_oidc_issuer_with_its_defaults():
    security = Settings.from_env(
        {
            **OIDC,
            "FETCHER_AUTH_AUDIENCE": "fetcher-api, account",
            "FETCHER_AUTH_PERMISSIONS_CLAIM": "realm_access.roles",
            "FETCHER_AUTH_TENANT_CLAIM": "organization.id",
            "FETCHER_CORS_ORIGINS": "https://app.example.com, http://localhost:3000/",
        }
    ).security
    assert security.enabled and security.audience == ("fetcher-api", "account")
    assert security.algorithms == ASYMMETRIC_ALGORITHMS and "HS256" not in security.algorithms
    assert security.permissions_claim == "realm_access.roles"
    assert security.tenant_claim == "organization.id"
    assert security.cors_origins == ("https://app.example.com", "http://localhost:3000")


def test_a_secret_means_hs256_only_and_is_never_shown():
    security = Settings.from_env({**OIDC, "FETCHER_AUTH_HS256_SECRET": SECRET}).security
    assert security.algorithms == ("HS256",)
    assert SECRET not in repr(security)


def test_a_public_key_can_be_a_file(tmp_path):
    pem = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"
    path = tmp_path / "key.pem"
    path.write_text(pem)
    security = Settings.from_env({**OIDC, "FETCHER_AUTH_PUBLIC_KEY": str(path)}).security
    assert security.public_key == pem


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"FETCHER_AUTH_ISSUER": "sso.example.com"}, "FETCHER_AUTH_ISSUER must be an http"),
        ({"FETCHER_AUTH_ISSUER": "https://u:p@sso.example.com"}, "must not carry credentials"),
        ({"FETCHER_AUTH_ISSUER": ISSUER}, "FETCHER_AUTH_AUDIENCE is required"),
        ({"FETCHER_AUTH_AUDIENCE": "x"}, "FETCHER_AUTH_AUDIENCE needs FETCHER_AUTH_ISSUER"),
        (
            {"FETCHER_AUTH_JWKS_URL": "https://sso.example.com/certs"},
            "FETCHER_AUTH_ISSUER is required with FETCHER_AUTH_JWKS_URL",
        ),
        (
            {
                **OIDC,
                "FETCHER_AUTH_JWKS_URL": "https://x/certs",
                "FETCHER_AUTH_HS256_SECRET": SECRET,
            },
            "set only one of FETCHER_AUTH_JWKS_URL, FETCHER_AUTH_HS256_SECRET",
        ),
        ({**OIDC, "FETCHER_AUTH_HS256_SECRET": "short"}, "FETCHER_AUTH_HS256_SECRET must be"),
        ({**OIDC, "FETCHER_AUTH_ALGORITHMS": "RS256,none"}, "FETCHER_AUTH_ALGORITHMS must not"),
        ({**OIDC, "FETCHER_AUTH_ALGORITHMS": "HS256"}, "FETCHER_AUTH_ALGORITHMS: HS256 not"),
        (
            {**OIDC, "FETCHER_AUTH_HS256_SECRET": SECRET, "FETCHER_AUTH_ALGORITHMS": "RS256"},
            "FETCHER_AUTH_ALGORITHMS must be HS256",
        ),
        ({"FETCHER_AUTH_ALGORITHMS": "RS256"}, "FETCHER_AUTH_ALGORITHMS needs"),
        ({**OIDC, "FETCHER_AUTH_LEEWAY_SECONDS": "3600"}, "FETCHER_AUTH_LEEWAY_SECONDS"),
        ({**OIDC, "FETCHER_AUTH_LEEWAY_SECONDS": "soon"}, "FETCHER_AUTH_LEEWAY_SECONDS"),
        ({**OIDC, "FETCHER_AUTH_PUBLIC_KEY": "/no/such/key.pem"}, "FETCHER_AUTH_PUBLIC_KEY"),
        ({"PLUGIN_AUTH_ENABLED": "true"}, "PLUGIN_AUTH_ADDRESS is required"),
        ({"PLUGIN_AUTH_ENABLED": "yes please"}, "PLUGIN_AUTH_ENABLED"),
        (
            {"PLUGIN_AUTH_ENABLED": "true", "PLUGIN_AUTH_ADDRESS": "auth:4000"},
            "PLUGIN_AUTH_ADDRESS must be",
        ),
        (
            {**OIDC, "FETCHER_AUTH_DISABLED_INSECURE": "true"},
            "FETCHER_AUTH_DISABLED_INSECURE=true contradicts",
        ),
        ({"FETCHER_CORS_ORIGINS": "app.example.com"}, "FETCHER_CORS_ORIGINS"),
        ({"FETCHER_CORS_ORIGINS": "https://a.example/path"}, "FETCHER_CORS_ORIGINS"),
        ({"FETCHER_CORS_ORIGINS": "*,https://a.example"}, "FETCHER_CORS_ORIGINS"),
    ],
)
def test_a_bad_auth_setting_names_itself(env, fragment):
    with pytest.raises(SettingsError, match=fragment):
        Settings.from_env(env)


def test_the_plugin_address_is_ignored_unless_enabled():
    security = Settings.from_env({"PLUGIN_AUTH_ADDRESS": "http://auth:4000"}).security
    assert not security.enabled and security.plugin_address is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("fetcher.internal", False),
    ],
)
def test_only_loopback_hosts_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def _settings(**env: str) -> Settings:
    return Settings.from_env(env)


def test_no_auth_on_loopback_runs_open_and_says_so_in_one_line(caplog):
    with caplog.at_level(logging.INFO):
        check_exposure(_settings())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("authentication is off")
    assert "127.0.0.1:4006" in lines[0]


def test_no_auth_beyond_loopback_refuses_to_start():
    with pytest.raises(SettingsError) as caught:
        check_exposure(_settings(SERVER_ADDRESS="0.0.0.0:4006"))
    message = str(caught.value)
    assert "\n" not in message
    assert "SERVER_ADDRESS 0.0.0.0:4006 is not loopback" in message
    assert "FETCHER_AUTH_DISABLED_INSECURE=true" in message
    with pytest.raises(SettingsError):
        check_exposure(_settings(SERVER_ADDRESS=":4006"))


def test_the_explicit_opt_out_warns_at_every_start(caplog):
    settings = _settings(SERVER_ADDRESS="0.0.0.0:4006", FETCHER_AUTH_DISABLED_INSECURE="true")
    with caplog.at_level(logging.WARNING):
        check_exposure(settings)
        check_exposure(settings)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert all("FETCHER_AUTH_DISABLED_INSECURE=true" in r.getMessage() for r in warnings)


def test_auth_configured_beyond_loopback_starts_quietly(caplog):
    with caplog.at_level(logging.INFO):
        check_exposure(_settings(SERVER_ADDRESS="0.0.0.0:4006", **OIDC))
    assert caplog.records == []


async def test_open_security_carries_the_cors_origins():
    settings = _settings(FETCHER_CORS_ORIGINS="https://app.example.com")
    async with open_http_security(settings) as security:
        assert not security.enabled
        assert security.cors_origins == ("https://app.example.com",)


async def test_a_public_key_gives_verified_tokens_with_the_algorithms_it_fits():
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    settings = _settings(SERVER_ADDRESS="0.0.0.0:4006", FETCHER_AUTH_PUBLIC_KEY=pem, **OIDC)
    async with open_http_security(settings) as security:
        assert isinstance(security.verifier, PyJwtTokenVerifier)
        assert isinstance(security.authorizer, ClaimPermissions)
        assert security.verifier._algorithms == ["ES256", "ES384", "ES512"]


async def test_a_bad_pem_or_an_unfitting_algorithm_stops_start_up():
    bad = _settings(FETCHER_AUTH_PUBLIC_KEY="-----BEGIN PUBLIC KEY-----\nxx\n", **OIDC)
    with pytest.raises(SettingsError, match="FETCHER_AUTH_PUBLIC_KEY is not a PEM public key"):
        async with open_http_security(bad):
            pass
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    unfitting = _settings(FETCHER_AUTH_PUBLIC_KEY=pem, FETCHER_AUTH_ALGORITHMS="RS256", **OIDC)
    with pytest.raises(SettingsError, match="FETCHER_AUTH_ALGORITHMS"):
        async with open_http_security(unfitting):
            pass


async def test_plugin_mode_without_keys_says_the_service_is_the_only_check(caplog):
    settings = _settings(PLUGIN_AUTH_ENABLED="true", PLUGIN_AUTH_ADDRESS="http://127.0.0.1:9")
    with caplog.at_level(logging.INFO):
        async with open_http_security(settings) as security:
            assert isinstance(security.verifier, UnverifiedClaimsReader)
            assert isinstance(security.authorizer, PluginAuthorizer)
    assert "the authorization service is the only check" in caplog.text
