"""Opening a listening socket before a server starts, so that an address that cannot be
listened on (a port in use, an address of another machine, a privileged port) stops start-up
with one line naming the setting, before anything else is opened or announced."""

from __future__ import annotations

import errno
import socket

from entrypoints.settings import SettingsError

BACKLOG = 2048

_REASONS = {
    errno.EADDRINUSE: "the port is already in use (is another fetcher running?)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def listen(host: str, port: int, *, setting: str) -> socket.socket:
    """A bound, listening TCP socket on ``host:port``; ``SettingsError`` naming ``setting``
    when the address cannot be used."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
        )
    except socket.gaierror as error:
        raise SettingsError(
            f"{setting} {address} cannot be listened on: {error.strerror}"
        ) from None
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host in ("::", ""):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(sockaddr)
        sock.listen(BACKLOG)
    except OSError as error:
        sock.close()
        reason = _REASONS.get(error.errno or 0, error.strerror or str(error))
        raise SettingsError(f"{setting} {address} cannot be listened on: {reason}") from None
    sock.setblocking(False)
    return sock
