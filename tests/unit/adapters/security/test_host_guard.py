"""The host guard: which addresses are internal, and pinning a name to an address it checked."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from adapters.security.host_guard import NetworkHostGuard, is_blocked_address, system_resolver
from application.errors import ConnectFailure, DatasourceUnavailable, ForbiddenHost


def resolver(table: dict[str, list[str]]):
    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "0.0.0.0",
        "100.64.0.1", "192.0.2.10", "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1",
        "240.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd12::1", "ff02::1",
        "2001:db8::1", "100::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1",
        "::7f00:1",
    ],
)  # fmt: skip
def test_internal_addresses_are_blocked(address):
    assert is_blocked_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8", "1.1.1.1", "2606:4700::1111", "64:ff9b::808:808", "64:ff9b:1::808:808",
        "::ffff:0:808:808", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
    ],
)  # fmt: skip
def test_public_addresses_are_allowed(address):
    assert not is_blocked_address(ipaddress.ip_address(address))


# IPv6 forms of a blocked IPv4 address: a translator, relay or tunnel forwards to the IPv4.
EMBEDDED_BLOCKED_IPV4 = [
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:0:7f00:1",  # IPv4-translated (RFC 2765)
    "::ffff:0:a00:1",
    "64:ff9b::7f00:1",  # well-known NAT64 (RFC 6052)
    "64:ff9b:1::7f00:1",  # local-use NAT64 (RFC 8215)
    "64:ff9b:1::a9fe:a9fe",
    "2002:7f00:1::1",  # 6to4
    "2002:a9fe:a9fe::1",
    "::7f00:1",  # IPv4-compatible (deprecated)
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1 (obfuscated)
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    "2001:0:a00:1:8000:63bf:f7f7:f7f7",  # Teredo, server 10.0.0.1
]


@pytest.mark.parametrize("address", EMBEDDED_BLOCKED_IPV4)
async def test_ipv6_forms_of_a_blocked_ipv4_address_are_refused(address):
    assert is_blocked_address(ipaddress.ip_address(address))
    guard = NetworkHostGuard(resolver({"aaaa.example": ["93.184.216.34", address]}))
    with pytest.raises(ForbiddenHost):
        guard.check_literal(address)
    with pytest.raises(ForbiddenHost):
        guard.check_literal(f"[{address}]")
    with pytest.raises(ForbiddenHost):
        await guard.pin(address, 5432)
    with pytest.raises(ForbiddenHost):
        await guard.pin("aaaa.example", 5432)


def test_literal_check_at_write_time_ignores_names():
    guard = NetworkHostGuard(resolver({}))
    for host in ("10.1.1.1", "[::1]", " 127.0.0.1 "):
        with pytest.raises(ForbiddenHost) as caught:
            guard.check_literal(host)
        assert caught.value.code == "FET-0414"
        assert caught.value.message == "Host is not a valid external database endpoint"
    guard.check_literal("localhost")  # names are checked when dialled
    guard.check_literal("8.8.8.8")


@pytest.mark.parametrize(
    "host",
    [
        "localhost", "LOCALHOST.", "metadata.google.internal", "db.internal", "printer.local",
        "svc.ns.svc.cluster.local", "169.254.169.254", "", "  ", "10.0.0.1", "rebind.example",
        "mixed.example",
    ],
)  # fmt: skip
async def test_pin_refuses_blocked_names_and_any_blocked_resolution(host):
    guard = NetworkHostGuard(
        resolver({"rebind.example": ["127.0.0.1"], "mixed.example": ["8.8.8.8", "10.0.0.1"]})
    )
    with pytest.raises(ForbiddenHost):
        await guard.pin(host, 5432)


async def test_pin_returns_the_checked_address():
    guard = NetworkHostGuard(resolver({"db.example.com": ["93.184.216.34", "93.184.216.35"]}))
    assert await guard.pin("DB.example.com.", 5432) == "93.184.216.34"
    assert await guard.pin("8.8.8.8", 5432) == "8.8.8.8"


async def test_pin_refuses_to_dial_a_name_that_does_not_resolve():
    guard = NetworkHostGuard(resolver({}))
    with pytest.raises(DatasourceUnavailable) as caught:
        await guard.pin("nowhere.example", 5432)
    assert caught.value.reason is ConnectFailure.HOST_NOT_RESOLVED


async def test_system_resolver_resolves_loopback_names():
    assert "127.0.0.1" in await system_resolver("localhost", 5432)


# --- schema cache ---------------------------------------------------------------------------
