"""The OpenAPI page as a new user opens it: `fetcher serve`, then /openapi in a real browser
(headless Chromium, installed by deploy/system-packages.sh) that cannot resolve any name, so
the page renders from what the service itself serves or not at all."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Processes, serving

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # every name resolves to nothing: a CDN, a validator or a font service would fail
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--virtual-time-budget=20000",
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with serving(tmp_path_factory, "openapi") as processes:
        yield processes


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is missing: run `bash deploy/system-packages.sh` as root"
    return found


def browse(url: str, profile: Path, *action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *action, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_page_loads_nothing_from_outside(service: Processes):
    page = httpx.get(f"{service.api_url}/openapi")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    linked = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert linked and all(link.startswith("/openapi/assets/") for link in linked), linked
    assert "//" not in page.text.replace("<!--", "")  # no scheme-relative or absolute URL
    for link in linked:
        asset = httpx.get(f"{service.api_url}{link}")
        assert asset.status_code == 200 and asset.content, link


def test_swagger_ui_renders_every_operation_offline(service: Processes, tmp_path: Path):
    document = httpx.get(f"{service.api_url}/openapi/openapi.json").json()
    operations = {
        (method.upper(), path) for path, methods in document["paths"].items() for method in methods
    }
    assert len(operations) >= 16

    result = browse(f"{service.api_url}/openapi", tmp_path / "profile", "--dump-dom")
    dom = result.stdout
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'id="swagger-ui"' in dom
    rendered = {
        (method, path)
        for method, path in re.findall(
            r'class="opblock-summary-method">([A-Z]+)</span>.*?data-path="([^"]+)"', dom
        )
    }
    assert rendered == operations, (operations - rendered, rendered - operations)
    assert "Register a connection" in dom and "Create an extraction job" in dom
    assert "btn authorize" in dom  # the bearer scheme: the Authorize button
    assert "Failed to load API definition" not in dom
