"""``fetcher healthcheck`` (the image's HEALTHCHECK) finds a worker's or relay's health port on
every form of ``SERVER_ADDRESS``: the role binds ``HEALTH_PORT`` on that address's host, and the
check asks there, a wildcard on its loopback."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from entrypoints import runners
from entrypoints.cli.healthcheck import local_health_urls
from entrypoints.settings import Settings

FETCHER = Path(sys.executable).parent / "fetcher"


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def role_health_port(env: dict[str, str], tmp_path: Path) -> Iterator[None]:
    """``/health`` on the socket a worker or relay opens for ``env`` (its own bind rule)."""
    settings = Settings.from_env({**env, "FETCHER_DATA_DIR": str(tmp_path / "var")})
    with runners._listen_health(settings) as sock:
        sock.setblocking(True)
        server = http.server.HTTPServer(sock.getsockname()[:2], _Health, bind_and_activate=False)
        server.socket.close()
        server.socket = sock
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield
        finally:
            server.shutdown()
            thread.join()


def _free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


ADDRESS_FORMS = [
    pytest.param("127.0.0.2:{api}", id="a specific IPv4 address (a pod IP)"),
    pytest.param("0.0.0.0:{api}", id="every IPv4 interface"),
    pytest.param(":{api}", id="every interface, as the reference ships it"),
    pytest.param("{api}", id="a bare port (loopback)"),
    pytest.param(
        "[::1]:{api}",
        id="IPv6 loopback",
        marks=pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here"),
    ),
    pytest.param(
        "[::]:{api}",
        id="every IPv6 interface",
        marks=pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here"),
    ),
]


@pytest.mark.parametrize("address", ADDRESS_FORMS)
def test_the_healthcheck_finds_the_health_port_where_the_role_binds_it(address, tmp_path):
    env = {"SERVER_ADDRESS": address.format(api=_free_port()), "HEALTH_PORT": str(_free_port())}
    with role_health_port(env, tmp_path):
        result = subprocess.run(
            [str(FETCHER), "healthcheck"],
            env={"PATH": "/usr/bin:/bin", **env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("healthy: ") and f":{env['HEALTH_PORT']}/" in result.stdout


@pytest.mark.parametrize(
    ("address", "urls"),
    [
        ("10.1.2.3:4006", ["http://10.1.2.3:4006/health", "http://10.1.2.3:4007/health"]),
        ("[fd00::7]:80", ["http://[fd00::7]:80/health", "http://[fd00::7]:4007/health"]),
        (
            "[fe80::1%eth0]:80",
            ["http://[fe80::1%25eth0]:80/health", "http://[fe80::1%25eth0]:4007/health"],
        ),
        (":4006", ["http://127.0.0.1:4006/health", "http://127.0.0.1:4007/health"]),
        ("fetcher-0.svc:9", ["http://fetcher-0.svc:9/health", "http://fetcher-0.svc:4007/health"]),
    ],
)
def test_the_health_port_is_asked_on_the_host_of_the_server_address(address, urls):
    assert local_health_urls({"SERVER_ADDRESS": address}) == urls


def test_an_unreadable_server_address_still_asks_the_loopback_health_port():
    assert local_health_urls({"SERVER_ADDRESS": "nonsense", "HEALTH_PORT": "9"}) == [
        "http://127.0.0.1:9/health"
    ]
