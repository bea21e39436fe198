"""Where the keys that sign tokens come from: one configured key, or the issuer's key set.

``JwksKeySource`` reads the issuer's JSON Web Key Set (found through OpenID Connect discovery,
or at a configured URL) with aiohttp and caches it. PyJWT's own ``PyJWKClient`` is not used: it
fetches with blocking ``urllib`` on the event loop and fetches again for every token naming an
unknown ``kid``, which lets any caller make the service hammer the issuer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import aiohttp
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from jwt import PyJWK, PyJWTError

from adapters.auth.bounded import read_at_most
from application.errors import AuthServiceUnavailable, Unauthenticated
from domain import error_catalogue as catalogue

log = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 1024 * 1024
DISCOVERY_PATH = "/.well-known/openid-configuration"

RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
ASYMMETRIC_ALGORITHMS = (*RSA_ALGORITHMS, *EC_ALGORITHMS, "EdDSA")


class SigningKeys(Protocol):
    """The key that checks a token signed with ``algorithm`` by the key named ``kid``."""

    async def key_for(self, kid: str | None, algorithm: str) -> Any: ...


class KeysUnavailable(AuthServiceUnavailable):
    entry = catalogue.SIGNING_KEYS_UNAVAILABLE


class StaticKey(SigningKeys):
    """One configured key (a PEM public key, or an HS256 secret) for every token."""

    def __init__(self, key: Any) -> None:
        self._key = key

    @classmethod
    def from_pem(cls, pem: str) -> StaticKey:
        """Raises ``ValueError`` when ``pem`` is not an RSA, EC or Ed25519 public key."""
        try:
            key = load_pem_public_key(pem.encode())
        except (TypeError, UnsupportedAlgorithm) as error:
            raise ValueError("not a supported public key") from error
        if not isinstance(
            key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
        ):
            raise ValueError("not an RSA, EC or Ed25519 public key")
        return cls(key)

    @classmethod
    def from_secret(cls, secret: str) -> StaticKey:
        return cls(secret.encode())

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithms this key can check."""
        key = self._key
        if isinstance(key, bytes):
            return ("HS256",)
        if isinstance(key, rsa.RSAPublicKey):
            return RSA_ALGORITHMS
        if isinstance(key, ec.EllipticCurvePublicKey):
            return EC_ALGORITHMS
        return ("EdDSA",)

    async def key_for(self, kid: str | None, algorithm: str) -> Any:
        return self._key


class JwksKeySource(SigningKeys):
    """The issuer's signing keys, cached.

    The set is fetched at ``open`` (a failure is logged; the next token tries again), again
    when it is older than ``max_age`` seconds, and again when a token names a ``kid`` the cache
    does not hold — at most once per ``min_interval`` seconds whatever the reason, so tokens
    with made-up ``kid`` values cannot make it fetch per request. Concurrent requests share one
    fetch. When a fetch fails the keys already cached stay in use.

    With ``jwks_url`` the set is read there; otherwise ``issuer`` is discovered first
    (``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must be ``issuer``, gives
    ``jwks_uri``). Only signature keys of asymmetric types are taken (``use`` absent or
    ``sig``); a key that states its ``alg`` checks only tokens of that algorithm.
    """

    def __init__(
        self,
        *,
        issuer: str | None = None,
        jwks_url: str | None = None,
        timeout: float = 5.0,
        min_interval: float = 30.0,
        max_age: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not issuer and not jwks_url:
            raise ValueError("an issuer or a JWKS URL is required")
        self._issuer = issuer.rstrip("/") if issuer else None
        self._jwks_url = jwks_url
        self._discovered: str | None = None
        self._timeout = timeout
        self._min_interval = min_interval
        self._max_age = max_age
        self._clock = clock
        self._keys: dict[str | None, dict[str, Any]] | None = None
        self._built: dict[tuple[str | None, str], PyJWK] = {}
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None
        self.fetches = 0

    @property
    def location(self) -> str:
        """Where the keys are read (for logs; never a secret)."""
        return self._jwks_url or f"{self._issuer}{DISCOVERY_PATH}"

    async def open(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        await self._refresh(self._clock())

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def probe(self) -> int:
        """Reads the key set now (discovering it first when needed) and returns how many
        usable signature keys it has; raises what prevents it (``aiohttp.ClientError``,
        ``TimeoutError``, ``OSError``, ``ValueError``), for ``fetcher check``."""
        owned = self._session is None
        if owned:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout)
            )
        try:
            return len(await self._fetch())
        finally:
            if owned:
                await self.close()

    async def key_for(self, kid: str | None, algorithm: str) -> Any:
        now = self._clock()
        if self._keys is None or now - self._fetched_at >= self._max_age:
            await self._refresh(now)
        found = self._find(kid)
        if found is None:
            await self._refresh(now)
            found = self._find(kid)
        if found is None:
            if self._keys is None:
                raise KeysUnavailable()
            raise Unauthenticated("the token's signing key is not one of the issuer's keys")
        return self._build(kid, found, algorithm)

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        keys = self._keys or {}
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _build(self, kid: str | None, jwk: dict[str, Any], algorithm: str) -> PyJWK:
        built = self._built.get((kid, algorithm))
        if built is None:
            try:
                built = PyJWK(jwk, None if "alg" in jwk else algorithm)
            except PyJWTError:
                raise Unauthenticated(
                    "the token's algorithm does not fit its signing key"
                ) from None
            self._built[(kid, algorithm)] = built
        return built

    async def _refresh(self, asked_at: float) -> None:
        async with self._lock:
            now = self._clock()
            attempted = self._attempted_at
            if attempted is not None and (
                attempted >= asked_at or now - attempted < self._min_interval
            ):
                return
            self._attempted_at = now
            try:
                keys = await self._fetch()
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                log.warning(
                    "could not fetch the token signing keys from %s: %s",
                    self.location,
                    _describe(error),
                )
                self._discovered = None
                return
            self._keys, self._built, self._fetched_at = keys, {}, now
            log.info("token signing keys loaded from %s: %d key(s)", self.location, len(keys))

    async def _fetch(self) -> dict[str | None, dict[str, Any]]:
        self.fetches += 1
        url = self._jwks_url or self._discovered or await self._discover()
        document = await self._get_json(url)
        listed = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(listed, list):
            raise ValueError("the key set has no 'keys' list")
        keys: dict[str | None, dict[str, Any]] = {}
        for jwk in listed:
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                continue
            if jwk.get("kty") not in {"RSA", "EC", "OKP"}:
                continue
            try:
                PyJWK(jwk)
            except PyJWTError:
                continue
            kid = jwk.get("kid")
            keys[kid if isinstance(kid, str) else None] = jwk
        if not keys:
            raise ValueError("the key set has no usable signature key")
        return keys

    async def _discover(self) -> str:
        document = await self._get_json(f"{self._issuer}{DISCOVERY_PATH}")
        if not isinstance(document, dict):
            raise ValueError("the discovery document is not a JSON object")
        issuer, jwks_uri = document.get("issuer"), document.get("jwks_uri")
        if not isinstance(issuer, str) or issuer.rstrip("/") != self._issuer:
            raise ValueError("the discovery document names another issuer")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise ValueError("the discovery document has no jwks_uri")
        self._discovered = jwks_uri
        return jwks_uri

    async def _get_json(self, url: str) -> Any:
        if self._session is None:
            raise ValueError("the key source is not open")
        async with self._session.get(
            url, headers={"Accept": "application/json"}, allow_redirects=False
        ) as response:
            if response.status != 200:
                raise ValueError(f"{url} answered HTTP {response.status}")
            raw = await read_at_most(response.content, MAX_DOCUMENT_BYTES)
        if raw is None:
            raise ValueError(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
        return json.loads(raw)


def _describe(error: Exception) -> str:
    if isinstance(error, ValueError) and not isinstance(error, json.JSONDecodeError):
        return str(error)
    return type(error).__name__
