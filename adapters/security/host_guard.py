"""The SSRF host guard of reference §3.5, resolving each name once and pinning the result."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence

from adapters.datasources.common.failures import connect_failure
from application.errors import DatasourceUnavailable, ForbiddenHost
from application.ports.host_guard import HostGuard

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

BLOCKED_NAMES = frozenset(
    {
        "localhost",
        "metadata.google.internal",
        "metadata.gcp.internal",
        "metadata.azure.internal",
        "169.254.169.254",
    }
)
BLOCKED_SUFFIXES = (".local", ".internal", ".cluster.local", ".localhost")

# Loopback, private, link-local, multicast, unspecified, shared address space, documentation
# and benchmark ranges, reserved; IPv6 equivalents, and the deprecated IPv4-compatible block.
BLOCKED_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/96",
        "100::/64",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def is_blocked_address(address: Address) -> bool:
    """True for an address no external database may have (IPv4-mapped and NAT64 IPv6 forms
    are judged by the IPv4 address they carry)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in _NAT64:
            address = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.is_unspecified or address.is_loopback or address.is_multicast:
        return True
    return any(address in net for net in BLOCKED_NETWORKS if net.version == address.version)


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip().strip("[]"))
    except ValueError:
        return None


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """Every address the system resolver gives for ``host`` (TCP), in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class NetworkHostGuard(HostGuard):
    """Refuses loopback, private, link-local, metadata and other internal destinations.

    ``pin`` resolves a name once (within ``resolve_timeout`` seconds), refuses it if **any**
    address is blocked, and returns the first address for the caller to dial: the address
    checked is the address used, so DNS rebinding between check and dial is not possible.
    """

    def __init__(self, resolver: Resolver = system_resolver, resolve_timeout: float = 5.0) -> None:
        self._resolve = resolver
        self._timeout = resolve_timeout

    def check_literal(self, host: str) -> None:
        address = _literal(host)
        if address is not None and is_blocked_address(address):
            raise ForbiddenHost()

    async def pin(self, host: str, port: int) -> str:
        name = host.strip().lower()
        if name.endswith("."):
            name = name[:-1]
        if not name or name in BLOCKED_NAMES or name.endswith(BLOCKED_SUFFIXES):
            raise ForbiddenHost()
        literal = _literal(name)
        if literal is not None:
            if is_blocked_address(literal):
                raise ForbiddenHost()
            return str(literal)
        try:
            async with asyncio.timeout(self._timeout):
                found = await self._resolve(name, port)
        except (OSError, TimeoutError, UnicodeError) as error:
            raise DatasourceUnavailable(
                "failed to resolve the datasource host", reason=connect_failure(error)
            ) from error
        addresses = [a for a in (_literal(text.split("%")[0]) for text in found) if a]
        if not addresses:
            raise DatasourceUnavailable("failed to resolve the datasource host")
        if any(is_blocked_address(a) for a in addresses):
            raise ForbiddenHost()
        return str(addresses[0])
