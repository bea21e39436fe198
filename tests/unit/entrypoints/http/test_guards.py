"""The one permission guard: it reads each route's permission from the handler's ``opt``."""

from __future__ import annotations

from litestar import Controller, Litestar, get
from litestar.datastructures import State
from litestar.testing import AsyncTestClient

from domain.identity import Permission
from entrypoints.http.auth import HttpSecurity
from entrypoints.http.guards import needs, permission_of, requires_permission


class Guarded(Controller):
    path = "/g"
    guards = [requires_permission]

    @get("/named", opt=needs(Permission.FETCHER_GET))
    async def named(self) -> str:
        return "ok"

    @get("/unnamed")
    async def unnamed(self) -> str:
        return "ok"


def app(security: HttpSecurity) -> Litestar:
    return Litestar([Guarded], state=State({"security": security}), debug=False)


def test_the_permission_is_read_from_the_handler_opt() -> None:
    assert permission_of(Guarded.named) is Permission.FETCHER_GET
    assert permission_of(Guarded.unnamed) is None


async def test_without_an_authoriser_a_named_route_is_served() -> None:
    async with AsyncTestClient(app(HttpSecurity())) as client:
        assert (await client.get("/g/named")).status_code == 200


async def test_a_guarded_route_that_names_no_permission_is_refused() -> None:
    async with AsyncTestClient(app(HttpSecurity())) as client:
        assert (await client.get("/g/unnamed")).status_code == 500
