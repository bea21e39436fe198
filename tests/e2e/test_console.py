"""The console in a real browser: headless Chromium (Debian's) driven by Playwright against
`fetcher serve` on the embedded default, with a PostgreSQL source read through a slowed proxy
so that a running job can be watched to its end.

Each page is screenshotted: list, a running job, a completed job with its verified proof, a
tampered job flagged, connections, a schema, checkpoints. `make console-screenshots` writes them
into `docs/images/console/`, where the docs show them (`FETCHER_CONSOLE_SHOTS` names the
folder; by default a temporary one, so that a test run leaves the checkout as it was). Nothing
may log a console error, fail a request or leave loopback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import Processes, base_env, serving
from tests.e2e.test_docs_site import browser, open_page  # noqa: F401  (fixture)
from tests.e2e.test_embedded_default import cli
from tests.e2e.test_job_flow import PRODUCT
from tests.integration.auth_servers import LocalIdentityProvider
from tests.support.tcp_proxy import ThreadedTcpProxy

SHOTS = Path(os.environ.get("FETCHER_CONSOLE_SHOTS") or tempfile.mkdtemp(prefix="console-shots-"))
MARKUP = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with serving(
        tmp_path_factory,
        "console",
        FETCHER_AUDIT_CHECKPOINT_SECONDS="1",
        # Every column of the 10,000 rows is larger: that job fails, the narrower ones do not.
        ENGINE_MAX_RESULT_BYTES="1200000",
    ) as processes:
        yield processes


@pytest.fixture(scope="module")
def slow_source() -> Iterator[ThreadedTcpProxy]:
    """PostgreSQL behind a proxy that hands its answers over at 150 kB/s."""
    with ThreadedTcpProxy("127.0.0.1", 5432, rate=150_000) as proxy:
        yield proxy


def _register(api: str, name: str, database: str, port: int, metadata: dict | None = None) -> str:
    response = httpx.post(
        f"{api}/v1/management/connections",
        headers={"X-Product-Name": PRODUCT},
        json={
            "configName": name,
            "type": "POSTGRESQL",
            "host": "127.0.0.1",
            "port": port,
            "databaseName": database,
            "userName": "postgres",
            "password": "p@ss w:rd/?#",
            "metadata": metadata or {},
        },
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _submit(api: str, mapped: dict, metadata: dict) -> str:
    response = httpx.post(
        f"{api}/v1/fetcher",
        json={"dataRequest": {"mappedFields": mapped}, "metadata": {"source": PRODUCT, **metadata}},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


def _status(api: str, job_id: str) -> str:
    return str(httpx.get(f"{api}/v1/fetcher/{job_id}").json()["status"])


def _wait_status(api: str, job_id: str, wanted: str, processes: Processes) -> None:
    deadline = time.monotonic() + 60
    while _status(api, job_id) != wanted:
        assert time.monotonic() < deadline, processes.tail()
        time.sleep(0.2)


def _wait_checkpointed(api: str, job_id: str, versions: int, processes: Processes) -> None:
    deadline = time.monotonic() + 30
    while True:
        found = httpx.get(f"{api}/v1/audit/checkpoints", params={"limit": "100"}).json()
        if any(
            (c.get("heads") or {}).get(job_id, [0])[0] >= versions for c in found["checkpoints"]
        ):
            return
        assert time.monotonic() < deadline, processes.tail()
        time.sleep(0.3)


def _shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _fresh(chromium: Browser) -> tuple[Page, list[str]]:
    page, troubles = open_page(chromium)
    page.set_viewport_size({"width": 1280, "height": 800})
    return page, troubles


def test_operators_and_auditors_follow_jobs_and_their_proofs(
    served: Processes,
    source_database: str,
    slow_source: ThreadedTcpProxy,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
) -> None:
    api = served.api_url
    _register(api, "fast_pg", source_database, 5432, {"note": MARKUP})
    _register(api, "slow_pg", source_database, slow_source.port)
    failed = _submit(api, {"fast_pg": {"accounts": ["*"]}}, {"tag": "too large"})
    _wait_status(api, failed, "failed", served)
    done = _submit(api, {"fast_pg": {"accounts": ["id", "email"]}}, {"tag": MARKUP})
    _wait_status(api, done, "completed", served)
    tampered = _submit(api, {"fast_pg": {"accounts": ["id"]}}, {"tag": "to be tampered"})
    _wait_status(api, tampered, "completed", served)
    _wait_checkpointed(api, done, 4, served)
    _wait_checkpointed(api, tampered, 4, served)

    page, troubles = _fresh(browser)
    page.goto(f"{api}/console")
    rows = page.locator("section.jobs tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text(tampered)  # newest first
    _shot(page, "jobs")

    # Filters: by status, then by config name (the form is driven from the keyboard).
    page.select_option("select[name=status]", "failed")
    page.locator("input[name=config]").focus()
    page.keyboard.press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(failed)
    assert "status=failed" in page.url

    # A failed job: its reason in words, with the code.
    page.locator(f"a[href='/console/jobs/{failed}']").click()
    expect(page.locator(".failure")).to_contain_text("grew past the size limit")
    expect(page.locator(".failure")).to_contain_text("FET-")
    _shot(page, "job-failed")

    # A completed job: result, timeline, and its proof, verified.
    page.goto(f"{api}/console/jobs/{done}")
    expect(page.locator("#job-status")).to_have_text("completed")
    expect(page.locator(".events .event")).to_have_count(4)
    expect(page.locator(".events")).to_contain_text("Claimed")
    expect(page.locator("pre.request")).to_contain_text("<script>")  # shown as text
    page.get_by_role("button", name="Verify").click()
    expect(page.locator(".verdict")).to_contain_text("Intact")
    expect(page.locator(".proof")).to_contain_text("valid")
    expect(page.locator(".checked")).to_contain_text("against its witness kept outside")
    _shot(page, "job-verified")

    # A tampered job: the row count its ResultStored event recorded, changed in the store.
    store = Path(served.env["FETCHER_DATA_DIR"]) / "fetcher.sqlite3"
    with sqlite3.connect(store) as db:
        [(state,)] = db.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? AND originator_version = 3",
            (tampered.replace("-", ""),),
        ).fetchall()
        forged = bytes(state).replace(b'"row_count":10000', b'"row_count":9999', 1)
        assert forged != bytes(state)
        db.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 3",
            (forged, tampered.replace("-", "")),
        )
    page.goto(f"{api}/console/jobs/{tampered}/history")
    page.get_by_role("button", name="Verify").click()
    expect(page.locator(".verdict")).to_contain_text("Broken")
    expect(page.locator(".problems")).to_contain_text("version 3's content does not match")
    _shot(page, "job-tampered")

    # A running job, watched until it ends: the list and the job page refresh by themselves.
    slow = _submit(api, {"slow_pg": {"accounts": ["id", "email", "amount"]}}, {"tag": "slow"})
    page.goto(f"{api}/console/jobs/{slow}")
    expect(page.locator("#job-status")).to_have_text("processing", timeout=20_000)
    _shot(page, "job-running")
    expect(page.locator("#job-status")).to_have_text("completed", timeout=60_000)
    expect(page.locator("h2", has_text="Result")).to_be_visible()

    # Connections: the list (its metadata never rendered as markup), a test, a schema.
    page.goto(f"{api}/console/connections")
    fast = page.locator("tr", has_text="fast_pg")
    fast.get_by_role("button", name="Test").click()
    expect(fast.locator(".test-result")).to_contain_text("Connection successful")
    _shot(page, "connections")
    fast.get_by_role("link", name="Schema").click()
    expect(page.locator("summary", has_text="accounts")).to_be_visible()
    _shot(page, "schema")

    # Checkpoints: each signature checked; a bundle downloaded here verifies offline.
    page.goto(f"{api}/console/checkpoints")
    expect(page.locator("section.checkpoints tbody tr").first).to_contain_text("valid")
    _shot(page, "checkpoints")
    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download bundle").click()
    bundle = tmp_path / "bundle.jsonl"
    downloading.value.save_as(bundle)
    data = Path(served.env["FETCHER_DATA_DIR"])
    key_env = base_env(APP_ENC_KEY=(data / "master.key").read_text().strip())
    public = cli("keys", "audit-public", "--raw", env=key_env).stdout.strip()
    offline = cli(
        "audit", "verify", "--bundle", str(bundle), "--public-key", public, env=base_env()
    )
    # The tampered job is in the bundle too: offline verification names it.
    assert offline.returncode == 1, offline.stdout + offline.stderr
    assert tampered in offline.stdout and "changed" in offline.stdout

    # A phone-sized screen reads the same list.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{api}/console/jobs")
    expect(rows.first).to_be_visible()
    _shot(page, "jobs-phone")

    assert page.evaluate("window.__pwned") is None, "markup from a request ran"
    assert troubles == [], troubles


def test_the_console_page_sends_a_strict_policy_and_no_inline_script(served: Processes) -> None:
    page = httpx.get(f"{served.api_url}/console/jobs")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "<script>" not in page.text and '<script type="module" src=' in page.text
    assert json.loads(httpx.get(f"{served.api_url}/version").text)


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIdentityProvider]:
    provider = LocalIdentityProvider().start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, issuer: LocalIdentityProvider
) -> Iterator[Processes]:
    with serving(
        tmp_path_factory,
        "console-secured",
        FETCHER_AUTH_ISSUER=issuer.issuer,
        FETCHER_AUTH_AUDIENCE=issuer.audience,
        FETCHER_CONSOLE_CLIENT_ID=issuer.client_id,
    ) as processes:
        yield processes


def test_signing_in_with_pkce_and_each_view_needs_its_permission(
    secured: Processes,
    issuer: LocalIdentityProvider,
    source_database: str,
    browser: Browser,  # noqa: F811
) -> None:
    api = secured.api_url
    admin = {"Authorization": f"Bearer {issuer.token()}"}
    created = httpx.post(
        f"{api}/v1/management/connections",
        headers={"X-Product-Name": PRODUCT, **admin},
        json={
            "configName": "secured_pg",
            "type": "POSTGRESQL",
            "host": "127.0.0.1",
            "port": 5432,
            "databaseName": source_database,
            "userName": "postgres",
            "password": "p@ss w:rd/?#",
        },
    )
    assert created.status_code == 201, created.text
    submitted = httpx.post(
        f"{api}/v1/fetcher",
        headers=admin,
        json={
            "dataRequest": {"mappedFields": {"secured_pg": {"accounts": ["id"]}}},
            "metadata": {"source": PRODUCT},
        },
    )
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()["jobId"]

    page, troubles = _fresh(browser)
    page.goto(f"{api}/console/jobs")
    # Without a token the data is refused; the page offers to sign in.
    expect(page.locator("main .error")).to_contain_text("Sign in")
    page.get_by_role("button", name="Sign in").click()
    # Off to the issuer and back (the code leaves the address at once), token in memory.
    expect(page.locator("section.jobs tbody tr")).to_have_count(1)
    expect(page.locator("section.jobs")).to_contain_text(job)
    assert page.url == f"{api}/console/jobs", page.url
    assert page.evaluate("sessionStorage.length + localStorage.length") == 0
    assert page.evaluate("document.cookie") == ""
    _shot(page, "signed-in")

    # An auditor: histories and proofs, nothing else.
    issuer.sign_in_permissions = ("fetcher:history",)
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("main .error")).to_contain_text("does not grant")
    page.get_by_role("link", name="Connections").click()
    expect(page.locator("main .error")).to_contain_text("FET-0007")
    page.get_by_placeholder("job id").fill(job)
    page.keyboard.press("Enter")
    expect(page.locator(".events .event").first).to_contain_text("Requested")
    page.get_by_role("link", name="Checkpoints").click()
    expect(page.locator("section.checkpoints h1")).to_have_text("Checkpoints")
    # A 401/403 of the data is expected here; anything else is not.
    unexpected = [t for t in troubles if "status of 401" not in t and "status of 403" not in t]
    assert unexpected == [], unexpected
