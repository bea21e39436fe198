"""The reference's authorization service (plugin mode, reference §2.1.1), asked over HTTP."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp

from adapters.auth.bounded import read_at_most
from application.errors import (
    AuthServiceRefused,
    AuthServiceUnavailable,
    PermissionDenied,
    Unauthenticated,
)
from application.ports.access_authorizer import AccessAuthorizer
from domain.identity import Identity, Permission

log = logging.getLogger(__name__)

AUTHORIZE_PATH = "/v1/authorize"
EDITOR_SUBJECT = "admin/fetcher-editor-role"
MAX_ANSWER_BYTES = 64 * 1024
REDACTED = "[REDACTED]"


def plugin_subject(claims: Mapping[str, Any]) -> str:
    """The subject the reference sends: ``<owner>/<sub>`` for a token of ``type``
    ``normal-user``, the application's editor role for any other token."""
    if claims.get("type") != "normal-user":
        return EDITOR_SUBJECT
    owner, sub = claims.get("owner"), claims.get("sub")
    if not isinstance(owner, str) or not owner:
        raise Unauthenticated("the token of a normal user has no owner claim")
    if not isinstance(sub, str) or not sub:
        raise Unauthenticated("the token has no subject")
    return f"{owner}/{sub}"


class PluginAuthorizer(AccessAuthorizer):
    """Asks ``POST <address>/v1/authorize`` with ``{"sub", "resource", "action"}`` and the
    caller's token as ``Authorization: Bearer``.

    ``{"authorized": true}`` allows; any other JSON answer of 2xx denies (403), logged with
    the kind of answer. An error answer of the service is relayed with its status
    (``AuthServiceRefused``); a service that cannot be reached in ``timeout`` seconds,
    redirects or answers something that is not JSON is unavailable (503). The history
    permission, which the reference's services do not know, is asked as ``fetcher``/``history``
    first and, when denied, as ``fetcher``/``get``.
    """

    def __init__(self, address: str, *, timeout: float = 5.0) -> None:
        self._url = address.rstrip("/") + AUTHORIZE_PATH
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return self._url

    async def open(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def authorize(self, identity: Identity, permission: Permission, token: str) -> None:
        subject = plugin_subject(identity.claims)
        allowed = await self._ask(subject, permission.resource, permission.action, token)
        if not allowed and permission is Permission.FETCHER_HISTORY:
            fallback = Permission.FETCHER_GET
            allowed = await self._ask(subject, fallback.resource, fallback.action, token)
        if not allowed:
            raise PermissionDenied()

    async def _ask(self, subject: str, resource: str, action: str, token: str) -> bool:
        if self._session is None:
            raise AuthServiceUnavailable()
        body = {"sub": subject, "resource": resource, "action": action}
        try:
            async with self._session.post(
                self._url,
                json=body,
                headers={"Authorization": f"Bearer {token}"},
                allow_redirects=False,
            ) as response:
                status = response.status
                raw = await read_at_most(response.content, MAX_ANSWER_BYTES)
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            log.warning("authorization service unreachable: %s", type(error).__name__)
            raise AuthServiceUnavailable() from None
        if status >= 400:
            raise _refusal(status, raw or b"", token)
        answer = _UNREADABLE if raw is None else _json(raw, _UNREADABLE)
        if not 200 <= status < 300 or answer is _UNREADABLE:
            log.warning("authorization service answered HTTP %d without a decision", status)
            raise AuthServiceUnavailable()
        if not isinstance(answer, dict):
            # JSON, but not the decision object: a bare true is no permission either.
            log.warning(
                "authorization service answered without a decision object (answer: %s); denied",
                _json_kind(answer),
            )
            return False
        decision = answer.get("authorized", _MISSING)
        if decision is True:
            return True
        if decision is not False:
            # Only the JSON boolean decides: "true", 1, {} or a missing field is no permission.
            log.warning(
                "authorization service answered without a boolean decision (authorized: %s); "
                "denied",
                _json_kind(decision),
            )
        return False


_MISSING = object()
_UNREADABLE = object()


def _json_kind(value: object) -> str:
    """What a decoded JSON value is, never the value itself (it might carry a secret)."""
    if value is _MISSING:
        return "missing"
    kinds = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    kinds |= {dict: "an object", list: "an array", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _json(raw: bytes, unreadable: Any = None) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return unreadable


def _refusal(status: int, raw: bytes, token: str) -> AuthServiceRefused:
    answer = _json(raw)
    if isinstance(answer, dict):
        fields = [answer.get(name) for name in ("code", "title", "message")]
        if all(isinstance(value, str) and value for value in fields):
            code, title, message = (str(value).replace(token, REDACTED) for value in fields)
            return AuthServiceRefused(status, code=code, title=title, message=message)
    return AuthServiceRefused(status)
