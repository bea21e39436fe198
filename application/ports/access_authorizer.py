from __future__ import annotations

from typing import Protocol

from domain.identity import Identity, Permission


class AccessAuthorizer(Protocol):
    """Decides whether an authenticated caller may do what a route does.

    - ``authorize`` returns when ``identity`` may use ``permission`` and raises
      ``application.errors.PermissionDenied`` (403) when not. ``token`` is the caller's bearer
      token, for authorisers that ask another service; it is never logged.
    - An authoriser that asks another service raises ``AuthServiceUnavailable`` when that
      service cannot be reached and ``AuthServiceRefused`` (relayed with its status) when it
      answers with an error of its own.
    """

    async def authorize(self, identity: Identity, permission: Permission, token: str) -> None: ...
