"""The audit trail over HTTP: digests in a job's history, a job as of a version or a time,
and the signed checkpoints (without other tenants' job ids in multi-tenant mode)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient

from adapters.audit.checkpoints import InMemoryCheckpointStore
from adapters.auth.claims import ClaimPermissions
from adapters.crypto.audit_signing import AuditKeys
from adapters.eventstore.store import EventsourcingJobEventStore
from application.audit.checkpointer import RecordCheckpoints
from domain.audit_chain import Checkpoint
from domain.identity import Identity, Permission
from domain.job import request_job
from domain.tenant import SINGLE_TENANT, Tenant
from entrypoints.composition import bootstrap
from entrypoints.http.app import create_app
from entrypoints.http.auth import HttpSecurity
from tests.support.audit_trail import audit_request
from tests.support.http import CONNECTION, JOB, PRODUCT
from tests.support.twins import App, in_memory_settings

HISTORY_ONLY = Identity("auditor", frozenset({Permission.FETCHER_HISTORY}), "tenant-a")
NOTHING = Identity("someone", frozenset({Permission.FETCHER_POST}), "tenant-a")


class Tokens:
    async def verify(self, token: str) -> Identity:
        from application.errors import Unauthenticated

        found = {"auditor": HISTORY_ONLY, "other": NOTHING}.get(token)
        if found is None:
            raise Unauthenticated("unknown token")
        return found


async def _audited(
    app: App, tmp_path: Path, security: HttpSecurity | None = None, **env: str
) -> AsyncIterator[tuple[AsyncTestClient[Any], RecordCheckpoints]]:
    store = EventsourcingJobEventStore.in_memory()
    checkpoints = InMemoryCheckpointStore()
    overrides = replace(app.overrides(), store=store, audit_log=store, checkpoints=checkpoints)
    try:
        async with bootstrap(in_memory_settings(tmp_path, **env), overrides=overrides) as fetcher:
            app.fetcher = fetcher
            recorder = RecordCheckpoints(
                store, checkpoints, AuditKeys.from_ring(app.ring).signer, app.clock, every_records=2
            )
            api = create_app(fetcher.api) if security is None else create_app(fetcher.api, security)
            async with AsyncTestClient(api) as client:
                yield client, recorder
    finally:
        await store.close()


@pytest.fixture
async def audited(app: App, tmp_path: Path) -> AsyncIterator[tuple[AsyncTestClient[Any], Any]]:
    async for pair in _audited(app, tmp_path):
        yield pair


async def _run_one(client: AsyncTestClient[Any], app: App) -> str:
    await client.post("/v1/management/connections", json=CONNECTION, headers=PRODUCT)
    created = await client.post("/v1/fetcher", json=JOB)
    assert created.status_code == 202, created.text
    job_id: str = created.json()["jobId"]
    app.clock.advance(seconds=10)
    await app.run_job(UUID(job_id), tenant=SINGLE_TENANT)
    return job_id


async def test_the_history_gives_each_event_its_digest_and_link(audited, app):
    client, _ = audited
    job_id = await _run_one(client, app)
    events = (await client.get(f"/v1/fetcher/{job_id}/events")).json()["events"]
    assert [e["version"] for e in events] == [1, 2, 3, 4]
    assert events[0]["prevDigest"] == ""
    for before, after in itertools.pairwise(events):
        assert len(after["digest"]) == 64
        assert after["prevDigest"] == before["digest"]
    assert list(events[0]) == ["type", "version", "timestamp", "facts", "digest", "prevDigest"]
    assert "digest" not in events[0]["facts"]


async def test_a_job_as_of_a_version_or_a_time(audited, app):
    client, _ = audited
    created_at = app.clock.now()
    job_id = await _run_one(client, app)
    now = (await client.get(f"/v1/fetcher/{job_id}")).json()
    assert now["status"] == "completed"
    first = (await client.get(f"/v1/fetcher/{job_id}", params={"asOf": "1"})).json()
    assert first["status"] == "pending" and "resultPath" not in first
    claimed = (await client.get(f"/v1/fetcher/{job_id}", params={"asOf": "2"})).json()
    assert claimed["status"] == "processing"
    at_creation = created_at.isoformat().replace("+00:00", "Z")
    then = await client.get(f"/v1/fetcher/{job_id}", params={"asOf": at_creation})
    assert then.json()["status"] == "pending"
    before = await client.get(f"/v1/fetcher/{job_id}", params={"asOf": "2000-01-01T00:00:00Z"})
    assert before.status_code == 404
    for bad in ("0", "yesterday", "2026-01-01T00:00:00"):
        refused = await client.get(f"/v1/fetcher/{job_id}", params={"asOf": bad})
        assert refused.status_code == 400, bad


async def test_checkpoints_are_listed_and_their_signatures_verify(audited, app):
    client, recorder = audited
    job_id = await _run_one(client, app)
    await recorder()
    listed = (await client.get("/v1/audit/checkpoints")).json()["checkpoints"]
    assert [c["position"] for c in listed] == [2, 4]
    app.clock.advance(seconds=61)
    await recorder()
    listed = (await client.get("/v1/audit/checkpoints")).json()["checkpoints"]
    assert [c["position"] for c in listed] == [2, 4, 5]
    keys = AuditKeys.from_ring(app.ring).keys
    for item in listed:
        checkpoint = Checkpoint.from_json(
            {
                **item,
                "recorded_at": item["recordedAt"],
                "key_id": item["keyId"],
                "heads_sha256": item["headsSha256"],
                "heads_root": item.get("headsRoot", ""),
            }
        )
        assert checkpoint.heads_root and checkpoint.heads_match
        assert keys.check(checkpoint.key_id, checkpoint.message(), item["signature"]).value == (
            "valid"
        )
    assert any(job_id in c["heads"] for c in listed)
    page = (await client.get("/v1/audit/checkpoints", params={"after": "2", "limit": "1"})).json()
    assert [c["position"] for c in page["checkpoints"]] == [4]
    assert (await client.get("/v1/audit/checkpoints", params={"limit": "0"})).status_code == 400


async def test_in_multi_tenant_mode_heads_are_left_out_and_history_permission_is_needed(
    app: App, tmp_path: Path
) -> None:
    security = HttpSecurity(Tokens(), ClaimPermissions())
    env = {"MULTI_TENANT_ENABLED": "true"}
    async for client, recorder in _audited(app, tmp_path, security, **env):
        # A job of another tenant, recorded straight into the store.
        assert await recorder() == 0
        other = UUID(int=7)
        requested = request_job(other, audit_request(), app.clock.now(), Tenant("tenant-b"))
        await recorder.log.append([requested])  # type: ignore[attr-defined]
        app.clock.advance(seconds=61)
        assert await recorder() == 1
        ok = await client.get("/v1/audit/checkpoints", headers={"Authorization": "Bearer auditor"})
        assert ok.status_code == 200
        [shown] = ok.json()["checkpoints"]
        assert "heads" not in shown and str(other) not in ok.text
        assert len(shown["headsSha256"]) == 64
        refused = await client.get(
            "/v1/audit/checkpoints", headers={"Authorization": "Bearer other"}
        )
        assert refused.status_code == 403
