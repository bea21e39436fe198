"""The audit trail on the embedded default: `fetcher serve` chains the job's events and its
relay signs checkpoints; `fetcher audit verify` passes against the store and, offline, against
an exported bundle with the public key that `fetcher keys audit-public` prints."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Processes, base_env, serving
from tests.e2e.test_embedded_default import cli, wait_for_event
from tests.e2e.test_job_flow import register, submit


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    with serving(
        tmp_path_factory,
        "audit",
        FETCHER_AUDIT_CHECKPOINT_SECONDS="1",
        FETCHER_AUDIT_CHECKPOINT_EVENTS="true",
    ) as processes:
        yield processes


def _checkpoints(api: str) -> list[dict]:
    response = httpx.get(f"{api}/v1/audit/checkpoints", params={"limit": "100"})
    assert response.status_code == 200, response.text
    return response.json()["checkpoints"]


async def test_a_served_job_verifies_in_the_store_and_offline(
    audited: Processes, source_database: str, tmp_path: Path
) -> None:
    data = Path(audited.env["FETCHER_DATA_DIR"])
    register(audited.api_url, source_database, "audit_pg")
    job_id = submit(audited.api_url, {"audit_pg": {"accounts": ["id"]}}, "audited")
    wait_for_event(data / "events.jsonl", job_id, audited)

    history = httpx.get(f"{audited.api_url}/v1/fetcher/{job_id}/events").json()["events"]
    assert [e["type"] for e in history][-1] == "Completed"
    assert all(len(e["digest"]) == 64 for e in history)
    assert [e["prevDigest"] for e in history[1:]] == [e["digest"] for e in history[:-1]]

    deadline = time.monotonic() + 30
    while not any(job_id in (c.get("heads") or {}) for c in _checkpoints(audited.api_url)):
        assert time.monotonic() < deadline, audited.tail()
        time.sleep(0.5)
    # Wait for the checkpoint that covers the job's last event too.
    while _checkpoints(audited.api_url)[-1]["heads"].get(job_id, [0])[0] < len(history):
        assert time.monotonic() < deadline, audited.tail()
        time.sleep(0.5)

    key_env = base_env(
        FETCHER_DATA_DIR=str(data), APP_ENC_KEY=(data / "master.key").read_text().strip()
    )
    verified = cli("audit", "verify", env=key_env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "OK" in verified.stdout

    # The relay kept each checkpoint outside the database too (the data folder's objects here,
    # the bucket in a deployment); the store agrees with what was witnessed.
    recorded = [c["position"] for c in _checkpoints(audited.api_url)]
    witnesses = data / "objects" / "audit" / "checkpoints"
    deadline = time.monotonic() + 30
    while len(list(witnesses.glob("*.json"))) < len(recorded):
        assert time.monotonic() < deadline, audited.tail()
        time.sleep(0.5)
    assert [int(p.stem) for p in sorted(witnesses.glob("*.json"))][: len(recorded)] == recorded
    witnessed = cli("audit", "verify", "--witness", "storage", env=key_env)
    assert witnessed.returncode == 0, witnessed.stdout + witnessed.stderr
    assert "witnesses: " in witnessed.stdout and "OK" in witnessed.stdout
    # And published as CloudEvents (the embedded default's file beside events.jsonl).
    published = data / "audit-checkpoints.jsonl"
    while not published.exists() or len(published.read_text().splitlines()) < len(recorded):
        assert time.monotonic() < deadline, audited.tail()
        time.sleep(0.5)
    events = [json.loads(line) for line in published.read_text().splitlines()]
    assert [e["headers"]["ce-id"] for e in events][: len(recorded)] == [
        f"fetcher.audit.checkpoint.{p}" for p in recorded
    ]
    assert {e["routingKey"] for e in events} == {"audit.checkpoint"}
    assert [json.loads(e["body"])["position"] for e in events][: len(recorded)] == recorded

    public = cli("keys", "audit-public", "--raw", env=key_env).stdout.strip()
    bundle = tmp_path / "bundle.jsonl"
    exported = cli("audit", "export", "--out", str(bundle), env=key_env)
    assert exported.returncode == 0, exported.stderr
    offline = cli(
        "audit", "verify", "--bundle", str(bundle), "--public-key", public, env=base_env()
    )
    assert offline.returncode == 0, offline.stdout + offline.stderr

    stranger = cli("keys", "audit-public", "--raw", env=base_env(APP_ENC_KEY="A" * 44)).stdout
    refused = cli(
        "audit",
        "verify",
        "--bundle",
        str(bundle),
        "--public-key",
        stranger.strip(),
        env=base_env(),
    )
    assert refused.returncode == 1
    assert "unsigned" in refused.stdout

    # A tenant's auditor: the job's inclusion proof, checked offline with the public key only.
    proof = httpx.get(f"{audited.api_url}/v1/fetcher/{job_id}/proof")
    assert proof.status_code == 200, proof.text
    assert proof.json()["checkpoint"]["heads_root"] and "heads" not in proof.json()["checkpoint"]
    proof_file = tmp_path / "proof.json"
    proof_file.write_text(proof.text)
    checked = cli(
        "audit", "verify-job", "--proof", str(proof_file), "--public-key", public, env=base_env()
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "OK" in checked.stdout and "under the checkpoint's heads root" in checked.stdout
    forged = proof.json()
    state = base64.b64decode(forged["records"][-1]["state"])
    forged["records"][-1]["state"] = base64.b64encode(
        state.replace(b"worker_id", b"worker_ID")
    ).decode()
    proof_file.write_text(json.dumps(forged))
    refused = cli(
        "audit", "verify-job", "--proof", str(proof_file), "--public-key", public, env=base_env()
    )
    assert refused.returncode == 1 and "FAIL" in refused.stdout, refused.stdout + refused.stderr
