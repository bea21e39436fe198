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
# and benchmark ranges, reserved; IPv6 equivalents, and the deprecated IPv4-compatible block
# (``::a.b.c.d``, all of it: nothing legitimate lives there).
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

# IPv6 blocks whose last 32 bits are an IPv4 address a translator or relay forwards to:
# IPv4-translated (RFC 2765), the well-known NAT64 prefix (RFC 6052) and the local-use NAT64
# block (RFC 8215, judged in its /96 layout, the IPv4 address in the last 32 bits).
_IPV4_IN_LAST_32_BITS = tuple(
    ipaddress.IPv6Network(net) for net in ("::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48")
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address stands for: IPv4-mapped, IPv4-translated and NAT64
    forms carry one in their last 32 bits; 6to4 (``2002::/16``) carries one after its prefix;
    Teredo (``2001::/32``) carries its server and, obfuscated, its client."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if any(address in net for net in _IPV4_IN_LAST_32_BITS):
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    return ()


def _blocked(address: Address) -> bool:
    if address.is_unspecified or address.is_loopback or address.is_multicast:
        return True
    return any(address in net for net in BLOCKED_NETWORKS if net.version == address.version)


def is_blocked_address(address: Address) -> bool:
    """True for an address no external database may have. An IPv6 address that carries an
    IPv4 address (see :func:`embedded_ipv4`) is blocked when any IPv4 address it carries is."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded:
            return any(_blocked(v4) for v4 in embedded)
    return _blocked(address)


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
