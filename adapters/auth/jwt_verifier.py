"""Bearer JWTs checked with PyJWT."""

from __future__ import annotations

from collections.abc import Sequence

import jwt

from adapters.auth.claims import ClaimNames, identity_from_claims
from adapters.auth.keys import SigningKeys
from application.errors import Unauthenticated
from application.ports.token_verifier import TokenVerifier
from domain.identity import Identity

MAX_TOKEN_CHARS = 16 * 1024
REQUIRED_CLAIMS = ["exp", "iss", "aud"]

_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet"),
    (jwt.InvalidAudienceError, "the token was issued for another audience"),
    (jwt.InvalidIssuerError, "the token was issued by another issuer"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim (exp, iss, aud)"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "the token's algorithm is not allowed for its key"),
    (jwt.InvalidKeyError, "the token's algorithm is not allowed for its key"),
)


def _reason(error: jwt.PyJWTError) -> str:
    for kind, reason in _REASONS:
        if isinstance(error, kind):
            return reason
    return "the token is malformed"


class PyJwtTokenVerifier(TokenVerifier):
    """Checks the signature with ``keys`` (an algorithm of ``algorithms`` only, never
    ``none``), then ``exp`` (required), ``nbf`` and ``iat`` with ``leeway`` seconds, ``iss``
    and ``aud`` (both required); the identity comes from the claims named by ``names``."""

    def __init__(
        self,
        keys: SigningKeys,
        *,
        issuer: str,
        audience: Sequence[str],
        algorithms: Sequence[str],
        leeway: float = 30.0,
        names: ClaimNames | None = None,
    ) -> None:
        if not algorithms or any(a.lower() == "none" for a in algorithms):
            raise ValueError("the algorithm allow-list must be non-empty and without 'none'")
        if not audience:
            raise ValueError("an audience is required")
        self._keys = keys
        self._issuer = issuer
        self._audience = list(audience)
        self._algorithms = list(algorithms)
        self._leeway = leeway
        self._names = names or ClaimNames()

    async def verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated("the token is malformed")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("the token is malformed") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in self._algorithms:
            raise Unauthenticated("the token's algorithm is not allowed")
        if kid is not None and not isinstance(kid, str):
            raise Unauthenticated("the token is malformed")
        key = await self._keys.key_for(kid, algorithm)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": REQUIRED_CLAIMS, "enforce_minimum_key_length": True},
            )
        except jwt.PyJWTError as error:
            raise Unauthenticated(_reason(error)) from None
        return identity_from_claims(claims, self._names)


class UnverifiedClaimsReader(TokenVerifier):
    """Reads the claims without checking the signature, as the reference does in its plugin
    mode: only for the plugin mode without keys, where the authorization service is then the
    only check. A token that is not a JWT is refused."""

    def __init__(self, names: ClaimNames | None = None) -> None:
        self._names = names or ClaimNames()

    async def verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated("the token is malformed")
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise Unauthenticated("the token is malformed") from None
        return identity_from_claims(claims, self._names)
