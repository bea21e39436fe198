"""Where the SQL Server and Oracle live tests find a server: a URL in the environment, else a
container through testcontainers when a Docker engine answers, else they are skipped."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, unquote, urlsplit

from domain.connection import DatabaseType, Endpoint


def docker_reachable() -> bool:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1)
                sock.connect(host[len("unix://") :])
            return True
        parts = urlsplit(host)
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 2375), 1):
            return True
    except OSError:
        return False


def endpoint_from_url(url: str, db_type: DatabaseType) -> Endpoint:
    """``scheme://user:password@host:port/name?ssl=mode&...``; for Oracle the path is the service
    name, other query pairs become ``options``."""
    parts = urlsplit(url)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    name = unquote(parts.path.lstrip("/"))
    options: dict[str, str] = {k: v for k, v in query.items() if k != "ssl"}
    if db_type is DatabaseType.ORACLE:
        options["serviceName"] = name
    return Endpoint(
        type=db_type,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 0,
        database_name=name,
        user_name=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        ssl_mode=query.get("ssl", ""),
        options=options,
    )


@contextmanager
def container(image: str, port: int, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A started container (testcontainers), as the host and port its ``port`` is mapped to."""
    from testcontainers.core.container import DockerContainer

    box = DockerContainer(image).with_exposed_ports(port)
    for key, value in env.items():
        box = box.with_env(key, value)
    with box:
        yield box.get_container_host_ip(), int(box.get_exposed_port(port))


def wait_until_ready(check: Callable[[], Awaitable[None]], seconds: float) -> None:
    async def poll() -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            try:
                await check()
                return
            except Exception:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(2)

    asyncio.run(poll())
