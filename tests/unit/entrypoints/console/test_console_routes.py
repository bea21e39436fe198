"""The console's routes on the in-memory twins, through the real app with tokens: each fragment
needs its API route's permission (an auditor sees histories and proofs, nothing else), every
value from a request is escaped, the page sends a strict policy, and the list filters."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from adapters.auth.claims import ClaimPermissions
from application.errors import Unauthenticated
from domain.identity import Identity, Permission
from entrypoints.composition import bootstrap
from entrypoints.http.app import create_app
from entrypoints.http.auth import HttpSecurity
from tests.support.twins import App, app, in_memory_settings  # noqa: F401  (fixture)

ALL = frozenset(p.value for p in Permission)
IDENTITIES = {
    "admin": Identity("admin", ALL, None),
    "auditor": Identity("audrey", frozenset({Permission.FETCHER_HISTORY.value}), None),
    "reader": Identity("rita", frozenset({Permission.FETCHER_GET.value}), None),
}
MARKUP = '<script>alert("x")</script><img src=x onerror=alert(1)>'


class Tokens:
    async def verify(self, token: str) -> Identity:
        if token not in IDENTITIES:
            raise Unauthenticated("unknown token")
        return IDENTITIES[token]


def as_(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


@pytest.fixture
async def client(app: App, tmp_path: Path) -> AsyncIterator[AsyncTestClient]:  # noqa: F811
    async with bootstrap(in_memory_settings(tmp_path), overrides=app.overrides()) as fetcher:
        app.fetcher = fetcher
        security = HttpSecurity(Tokens(), ClaimPermissions())
        async with AsyncTestClient(create_app(fetcher.api, security)) as test_client:
            yield test_client


async def _job(client: AsyncTestClient, tag: str = MARKUP, source: str = "payments") -> str:
    response = await client.post(
        "/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id", "name"]}}},
            "metadata": {"source": source, "tag": tag},
        },
        headers=as_("admin"),
    )
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


async def test_the_page_is_open_and_strict_and_its_data_needs_a_token(client, app):  # noqa: F811
    page = await client.get("/console/jobs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "frame-ancestors 'none'" in policy
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text), "an inline script"
    assert (await client.get("/console-assets/console.js")).status_code == 200
    refused = await client.get("/v1/console/jobs")
    assert refused.status_code == 401 and refused.json()["code"] == "FET-0006"


async def test_an_auditor_sees_histories_and_proofs_and_nothing_else(client, app):  # noqa: F811
    await app.connection()
    job = await _job(client)
    assert (await client.get("/v1/console/jobs", headers=as_("auditor"))).status_code == 403
    assert (await client.get(f"/v1/console/jobs/{job}", headers=as_("auditor"))).status_code == 403
    assert (await client.get("/v1/console/connections", headers=as_("auditor"))).status_code == 403
    history = await client.get(f"/v1/console/jobs/{job}/history", headers=as_("auditor"))
    assert history.status_code == 200 and "Requested" in history.text
    proof = await client.post(f"/v1/console/jobs/{job}/verify", headers=as_("auditor"))
    assert proof.status_code == 200
    assert (await client.get("/v1/console/checkpoints", headers=as_("auditor"))).status_code == 200
    # And one who may read jobs (which grants their histories too, as the API's route does),
    # not connections:
    assert (await client.get("/v1/console/jobs", headers=as_("reader"))).status_code == 200
    history = await client.get(f"/v1/console/jobs/{job}/history", headers=as_("reader"))
    assert history.status_code == 200
    assert (await client.get(f"/v1/fetcher/{job}/events", headers=as_("reader"))).status_code == 200
    tested = await client.post(
        f"/v1/console/connections/{(await app.connection('other')).id}/test",
        headers=as_("reader"),
    )
    assert tested.status_code == 403


async def test_values_from_requests_are_escaped_everywhere(client, app):  # noqa: F811
    connection = await app.connection(name="pgsql", product="payments")
    job = await _job(client, source="payments")
    pages = [
        await client.get("/v1/console/jobs", headers=as_("admin")),
        await client.get(f"/v1/console/jobs/{job}", headers=as_("admin")),
        await client.get(f"/v1/console/jobs/{job}/history", headers=as_("admin")),
        await client.get("/v1/console/connections", headers=as_("admin")),
        await client.get("/v1/console/jobs", params={"source": MARKUP}, headers=as_("admin")),
    ]
    job_page = pages[1].text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in job_page.replace("\\", "")
    for page in pages:
        assert page.status_code == 200, page.text
        assert "<script" not in page.text and "<img" not in page.text
    assert connection.config_name in pages[3].text


async def test_the_list_filters_pages_and_shows_newest_first(client, app):  # noqa: F811
    await app.connection()
    jobs = [await _job(client, tag=f"t{n}", source="payments") for n in range(3)]
    listed = await client.get("/v1/console/jobs", headers=as_("admin"))
    order = [listed.text.index(job) for job in reversed(jobs)]
    assert order == sorted(order), "not newest first"
    assert 'data-refresh="2000"' in listed.text  # pending jobs: the list refreshes
    none = await client.get("/v1/console/jobs", params={"status": "failed"}, headers=as_("admin"))
    assert all(job not in none.text for job in jobs) and "No jobs match" in none.text
    bad = await client.get("/v1/console/jobs", params={"status": "nope"}, headers=as_("admin"))
    assert bad.status_code == 400 and "status" in bad.json()["message"]
    other = await client.get("/v1/console/jobs", params={"config": "x"}, headers=as_("admin"))
    assert all(job not in other.text for job in jobs)
