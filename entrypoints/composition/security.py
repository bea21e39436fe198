"""How the HTTP API authenticates and authorises, built from the settings at start.

Safe defaults: with no authentication configured the API runs open only on a loopback
address (the embedded default), and says so; on any other address it refuses to start unless
``FETCHER_AUTH_DISABLED_INSECURE=true``, and then warns at every start. Multi-tenant mode takes
the tenant from a token claim, so it refuses to start unless tokens are verified.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import AsyncIterator

from adapters.auth.claims import ClaimNames, ClaimPermissions
from adapters.auth.jwt_verifier import PyJwtTokenVerifier, UnverifiedClaimsReader
from adapters.auth.keys import JwksKeySource, SigningKeys, StaticKey
from adapters.auth.plugin import PluginAuthorizer
from application.ports.access_authorizer import AccessAuthorizer
from application.ports.token_verifier import TokenVerifier
from entrypoints.http.auth import HttpSecurity
from entrypoints.settings import SecuritySettings, Settings, SettingsError

log = logging.getLogger("fetcher")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings) -> None:
    """Refuses to serve without authentication beyond loopback unless explicitly allowed;
    logs one line saying the API runs open when it does."""
    security, http = settings.security, settings.http
    if security.enabled:
        return
    address = f"{http.host}:{http.port}"
    if security.disabled_insecure:
        log.warning(
            "FETCHER_AUTH_DISABLED_INSECURE=true: authentication is off on %s, every route is "
            "open to anyone who can reach it",
            address,
        )
    elif is_loopback(http.host):
        log.warning(
            "authentication is off: every route is open to callers on this machine (%s is "
            "loopback); set FETCHER_AUTH_ISSUER before listening beyond it",
            address,
        )
    else:
        raise SettingsError(
            f"SERVER_ADDRESS {address} is not loopback and no authentication is configured: "
            "set FETCHER_AUTH_ISSUER (and FETCHER_AUTH_AUDIENCE) or PLUGIN_AUTH_ENABLED, or "
            "FETCHER_AUTH_DISABLED_INSECURE=true to serve every route to anyone"
        )


def check_tenancy(settings: Settings) -> None:
    """Refuses multi-tenant mode without token verification (a tenant claim nobody checked
    would let any caller name any tenant); says how requests are tenanted when it is on."""
    tenancy, security = settings.tenancy, settings.security
    if not tenancy.enabled:
        return
    if not security.verifies_tokens:
        raise SettingsError(
            "MULTI_TENANT_ENABLED=true needs verified tokens, since the tenant is a token claim: "
            "set FETCHER_AUTH_ISSUER and FETCHER_AUTH_AUDIENCE (and a key source)"
        )
    served = ", ".join(tenancy.allowed) if tenancy.allowed else "any tenant"
    log.info(
        "multi-tenant: each request runs as the tenant of claim %r (serving %s)",
        security.tenant_claim,
        served,
    )
    if not settings.connections.ssrf_guard:
        log.warning(
            "FETCHER_SSRF_GUARD=false in multi-tenant mode: tenants may register connections "
            "to this service's own network"
        )


def check_http_security(settings: Settings) -> None:
    """Refuses, at start, what the API must not serve as configured (``check_exposure``,
    ``check_tenancy``), and says how it serves."""
    check_exposure(settings)
    check_tenancy(settings)


def _signing_keys(security: SecuritySettings) -> SigningKeys:
    if security.hs256_secret:
        return StaticKey.from_secret(security.hs256_secret)
    if security.public_key:
        try:
            return StaticKey.from_pem(security.public_key)
        except ValueError:
            raise SettingsError(
                "FETCHER_AUTH_PUBLIC_KEY is not a PEM public key (RSA, EC or Ed25519)"
            ) from None
    return JwksKeySource(issuer=security.issuer, jwks_url=security.jwks_url)


def _algorithms(security: SecuritySettings, keys: SigningKeys) -> tuple[str, ...]:
    if not isinstance(keys, StaticKey):
        return security.algorithms
    fitting = tuple(a for a in security.algorithms if a in keys.algorithms)
    if not fitting:
        raise SettingsError("FETCHER_AUTH_ALGORITHMS has no algorithm that fits the key")
    return fitting


@contextlib.asynccontextmanager
async def open_http_security(settings: Settings) -> AsyncIterator[HttpSecurity]:
    """The API's ``HttpSecurity``; key sets and the authorization service's client are open
    while the context is. The refusals of ``check_http_security`` are the runner's to make
    first, before anything opens."""
    security = settings.security
    if not security.enabled:
        yield HttpSecurity(cors_origins=security.cors_origins)
        return
    names = ClaimNames(permissions=security.permissions_claim, tenant=security.tenant_claim)
    async with contextlib.AsyncExitStack() as stack:
        verifier: TokenVerifier
        if security.issuer is not None:
            keys = _signing_keys(security)
            if isinstance(keys, JwksKeySource):
                await keys.open()
                stack.push_async_callback(keys.close)
            verifier = PyJwtTokenVerifier(
                keys,
                issuer=security.issuer,
                audience=security.audience,
                algorithms=_algorithms(security, keys),
                leeway=security.leeway_seconds,
                names=names,
            )
            log.info(
                "authentication: bearer tokens of %s for %s, permissions from claim %r",
                security.issuer,
                ", ".join(security.audience),
                security.permissions_claim,
            )
        else:
            verifier = UnverifiedClaimsReader(names)
            log.warning(
                "PLUGIN_AUTH_ENABLED without FETCHER_AUTH_ISSUER: token signatures are not "
                "checked, the authorization service is the only check (as in the reference)"
            )
        authorizer: AccessAuthorizer
        if security.plugin_enabled and security.plugin_address:
            plugin = PluginAuthorizer(security.plugin_address)
            await plugin.open()
            stack.push_async_callback(plugin.close)
            authorizer = plugin
            log.info("authorisation: asking the authorization service at %s", plugin.url)
        else:
            authorizer = ClaimPermissions()
        yield HttpSecurity(verifier, authorizer, security.cors_origins)
