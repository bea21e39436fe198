"""Who is calling and what they may do: the permissions of the API and the caller's identity.

A permission is one resource and one action of the reference (§2.1): ``connections`` with
``post|get|patch|delete``, ``fetcher`` with ``post|get``; plus ``fetcher:history``, which lets an
auditor read a job's event history and nothing else. The reference has no history route, so
``fetcher:get`` grants the history too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final


class Permission(StrEnum):
    """``<resource>:<action>``, the names a token's permissions claim carries."""

    CONNECTIONS_POST = "connections:post"
    CONNECTIONS_GET = "connections:get"
    CONNECTIONS_PATCH = "connections:patch"
    CONNECTIONS_DELETE = "connections:delete"
    FETCHER_POST = "fetcher:post"
    FETCHER_GET = "fetcher:get"
    FETCHER_HISTORY = "fetcher:history"

    @property
    def resource(self) -> str:
        return self.value.partition(":")[0]

    @property
    def action(self) -> str:
        return self.value.partition(":")[2]


GRANTED_BY: Final[Mapping[Permission, frozenset[Permission]]] = {
    Permission.FETCHER_HISTORY: frozenset({Permission.FETCHER_HISTORY, Permission.FETCHER_GET}),
}
"""Permissions that more than one granted name satisfies; every other permission is granted by
its own name only."""


def granting(permission: Permission) -> frozenset[Permission]:
    """The granted permissions any one of which allows ``permission``."""
    return GRANTED_BY.get(permission, frozenset({permission}))


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller whose token checked out.

    ``subject`` is the token's ``sub`` ("" when it has none); ``permissions`` are the names its
    permissions claim grants (names this service does not know are kept and ignored);
    ``tenant`` is the value of the tenant claim, when the token has one. ``claims`` are the
    token's claims, for authorisers that need more than the above; never shown or logged.
    """

    subject: str
    permissions: frozenset[str] = frozenset()
    tenant: str | None = None
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def allows(self, permission: Permission) -> bool:
        return any(granted.value in self.permissions for granted in granting(permission))
