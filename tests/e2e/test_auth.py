"""Authentication in the real processes: `fetcher api` verifies tokens of an issuer on loopback;
`fetcher serve` refuses to listen beyond loopback without auth unless told, and warns then."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from uuid import uuid4

import httpx

from tests.e2e.conftest import FETCHER, ROOT, Processes, base_env, free_port
from tests.integration.auth_servers import LocalIdentityProvider, new_key


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_api_process_verifies_tokens_and_permissions(
    production: Processes, identity_provider: LocalIdentityProvider
):
    api, idp = production.api_url, identity_provider
    connections = f"{api}/v1/management/connections"
    missing = httpx.get(connections)
    assert missing.status_code == 401 and missing.json()["code"] == "FET-0006"
    assert missing.headers["www-authenticate"] == "Bearer"
    for token in (
        idp.token(key=new_key(kid=idp.current.kid)),
        idp.token(aud="another-api"),
        idp.token(exp=int(time.time()) - 120),
    ):
        response = httpx.get(connections, headers=bearer(token))
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'

    auditor = bearer(idp.token(["fetcher:history"]))
    assert httpx.get(f"{api}/v1/fetcher/{uuid4()}/events", headers=auditor).status_code == 404
    denied = httpx.post(f"{api}/v1/fetcher", json={}, headers=auditor)
    assert denied.status_code == 403 and denied.json()["code"] == "FET-0007"
    assert httpx.get(connections, headers=auditor).status_code == 403
    for open_route in ("/health", "/readyz", "/version", "/openapi/openapi.json"):
        assert httpx.get(f"{api}{open_route}").status_code == 200, open_route
    logs = production.tail()
    assert idp.token() not in logs and "Bearer ey" not in logs


def _serve(tmp_path: Path, **extra: str) -> tuple[subprocess.Popen[bytes], Path, str]:
    port = free_port()
    log = tmp_path / "serve.log"
    env = base_env(
        FETCHER_DATA_DIR=str(tmp_path / "data"), SERVER_ADDRESS=f"0.0.0.0:{port}", **extra
    )
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [FETCHER, "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return proc, log, f"http://127.0.0.1:{port}"


def test_serve_refuses_to_listen_beyond_loopback_without_auth(tmp_path: Path):
    proc, log, _ = _serve(tmp_path)
    assert proc.wait(timeout=60) == 2
    lines = log.read_text().splitlines()
    assert lines[-1].startswith("fetcher: configuration error: SERVER_ADDRESS 0.0.0.0:")
    assert "FETCHER_AUTH_DISABLED_INSECURE=true" in lines[-1]
    assert not (tmp_path / "data").exists()


def test_the_explicit_opt_out_serves_open_and_warns(tmp_path: Path):
    proc, log, api = _serve(tmp_path, FETCHER_AUTH_DISABLED_INSECURE="true")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{api}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        listed = httpx.get(f"{api}/v1/management/connections")
        assert listed.status_code == 200, listed.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    warnings = [line for line in log.read_text().splitlines() if "DISABLED_INSECURE" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0]
