"""The documentation site and the API's OpenAPI page as a reader sees them: the built site
served on loopback and `fetcher serve`'s /openapi, rendered by headless Chromium (Debian's,
installed by deploy/system-packages.sh; never a downloaded browser) driven by Playwright, with
every request off loopback refused: pages load without console errors, the diagrams render,
search finds a setting by name, and the consumer guide shows the file the consumer test runs."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Route, sync_playwright

from tests.docs.test_site_builds import build
from tests.e2e.conftest import ROOT, Processes, serving

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # every name resolves to nothing: a CDN or a font service would fail
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
EXAMPLE = ROOT / "docs" / "examples" / "consumer.py"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docs") / "site"


@pytest.fixture(scope="module")
def site_url(site: Path) -> Iterator[str]:
    result = build(site)
    assert result.returncode == 0, result.stdout + result.stderr
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert shutil.which(CHROMIUM), "Chromium is missing: run `bash deploy/system-packages.sh`"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Troubles(list[str]):
    """Console errors, uncaught exceptions, failed requests and requests off loopback."""


def open_page(browser: Browser) -> tuple[Page, Troubles]:
    page = browser.new_page()
    troubles = Troubles()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            troubles.append(f"console error: {message.text}")

    page.on("console", console)
    page.on("pageerror", lambda e: troubles.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: troubles.append(f"failed: {r.url}"))

    def loopback_only(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            troubles.append(f"off loopback: {route.request.url}")
            route.abort()

    page.route("**/*", loopback_only)
    return page, troubles


def site_pages(site: Path) -> list[str]:
    """The URL path of every page the build wrote (404.html aside)."""
    pages = sorted(
        "/" + str(html.parent.relative_to(site)).removeprefix(".") + "/"
        for html in site.rglob("index.html")
        if not html.is_relative_to(site / "assets")
    )
    return [path.replace("//", "/") for path in pages]


def test_every_page_loads_without_errors_and_its_diagrams_render(
    site: Path, site_url: str, browser: Browser
):
    paths = site_pages(site)
    assert len(paths) >= 12 and "/guides/consumers/" in paths, paths
    diagrams = 0
    for path in paths:
        page, troubles = open_page(browser)
        response = page.goto(site_url + path, wait_until="networkidle")
        assert response is not None and response.status == 200, path
        page.wait_for_load_state("networkidle")
        # Material replaces each `pre.mermaid` source with a rendered `div.mermaid`
        unrendered = page.eval_on_selector_all("pre.mermaid", "els => els.length")
        heights = page.eval_on_selector_all(
            "div.mermaid", "els => els.map(e => e.getBoundingClientRect().height)"
        )
        diagrams += len(heights)
        page.close()
        assert troubles == [], (path, troubles)
        assert unrendered == 0 and all(h > 50 for h in heights), (path, unrendered, heights)
    assert diagrams >= 3  # the roles, a job's states, the outbox sequence


def test_search_finds_a_setting_by_name(site_url: str, browser: Browser):
    page, troubles = open_page(browser)
    page.goto(site_url + "/", wait_until="networkidle")
    # typed once the search index is loaded (by a web worker), as a reader would
    page.wait_for_function(
        "() => document.querySelector('.md-search-result__meta').textContent"
        ".includes('Type to start')"
    )
    page.focus("input.md-search__input")
    page.keyboard.type("FETCHER_DATABASE_URL", delay=20)
    page.wait_for_selector(".md-search-result__item", timeout=15_000)
    hits = page.eval_on_selector_all(".md-search-result__item a", "els => els.map(e => e.href)")
    page.close()
    assert troubles == []
    # the settings table: the operators' page, or the generated configuration reference
    assert any("/operators/" in hit or "/reference/configuration/" in hit for hit in hits), hits


def test_the_consumer_guide_shows_the_code_the_consumer_test_runs(site_url: str, browser: Browser):
    page, troubles = open_page(browser)
    page.goto(site_url + "/guides/consumers/", wait_until="networkidle")
    blocks = page.eval_on_selector_all("pre code", "els => els.map(e => e.innerText)")
    page.close()
    assert troubles == []
    shown = [block for block in blocks if "def verify_signature" in block]
    assert len(shown) == 1
    assert shown[0].strip() == EXAMPLE.read_text().strip()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with serving(tmp_path_factory, "docs-openapi") as processes:
        yield processes


def test_the_openapi_page_renders_every_operation_without_errors(
    service: Processes, browser: Browser
):
    page, troubles = open_page(browser)
    page.goto(f"{service.api_url}/openapi", wait_until="networkidle")
    page.wait_for_selector(".opblock", timeout=30_000)
    paths = page.eval_on_selector_all(
        ".opblock-summary-path", "els => els.map(e => e.getAttribute('data-path'))"
    )
    page.close()
    assert troubles == []
    assert {"/v1/fetcher", "/v1/management/connections", "/health"} <= set(paths), paths
