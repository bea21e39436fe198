from __future__ import annotations

from typing import Protocol

from domain.identity import Identity


class TokenVerifier(Protocol):
    """Turns a bearer token into the caller's identity, or refuses it.

    - ``verify`` checks the token (with keys configured: its signature against the issuer's
      keys, ``exp`` and ``nbf`` with a small leeway, ``iss`` and ``aud``, an algorithm from the
      allow-list, never ``none``) and returns the identity its claims describe.
    - A token that does not check out raises ``application.errors.Unauthenticated`` with a
      short reason; keys that cannot be fetched (and none cached) raise
      ``application.errors.AuthServiceUnavailable``.
    - Keys are cached; they are fetched again only when a token names a key not in the cache
      (rate-limited) or the cache is old, never once per request.
    - The token is never logged, and no message quotes it.
    """

    async def verify(self, token: str) -> Identity: ...
