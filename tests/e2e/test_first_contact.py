"""An operator starts `fetcher api`, `worker` and `relay` from a fresh folder with nothing set:
each refuses to start, with one line per setting it lacks and an example value, instead of
running alone on an embedded default that the other roles cannot see."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import FETCHER

PREFIX = "fetcher: configuration error: "
EXPECTED = {
    "api": ("FETCHER_DATABASE_URL", "RABBITMQ_URL", "APP_ENC_KEY"),
    "worker": ("FETCHER_DATABASE_URL", "RABBITMQ_URL", "OBJECT_STORAGE_BUCKET", "APP_ENC_KEY"),
    "relay": ("FETCHER_DATABASE_URL", "RABBITMQ_URL", "APP_ENC_KEY"),
}
EXAMPLES = {
    "FETCHER_DATABASE_URL": "e.g. FETCHER_DATABASE_URL=postgresql://",
    "RABBITMQ_URL": "e.g. RABBITMQ_URL=amqp://",
    "OBJECT_STORAGE_BUCKET": "e.g. OBJECT_STORAGE_BUCKET=",
    "APP_ENC_KEY": "e.g. APP_ENC_KEY=$(openssl rand -base64 32)",
}


def start(role: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FETCHER, role],
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("role", list(EXPECTED))
def test_a_role_started_with_nothing_set_names_every_missing_setting(role, tmp_path):
    result = start(role, {}, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert [line.removeprefix(PREFIX).split(" ", 1)[0] for line in lines] == list(EXPECTED[role])
    for name, line in zip(EXPECTED[role], lines, strict=True):
        assert line.startswith(f"{PREFIX}{name} is required by `fetcher {role}`"), line
        assert EXAMPLES[name] in line, line
    assert list(tmp_path.iterdir()) == [], "nothing embedded was created"


def test_only_the_settings_still_missing_are_named(tmp_path):
    env = {
        "FETCHER_DATABASE_URL": "postgresql://fetcher@127.0.0.1:5432/fetcher",
        "APP_ENC_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    }
    result = start("worker", env, tmp_path)
    assert result.returncode == 2
    named = [line.removeprefix(PREFIX).split(" ", 1)[0] for line in result.stderr.splitlines()]
    assert named == ["RABBITMQ_URL", "OBJECT_STORAGE_BUCKET"]


def test_serve_keeps_its_embedded_defaults(tmp_path):
    """`fetcher serve` needs none of them; its help says so by listing no required setting."""
    result = subprocess.run(
        [FETCHER, "serve", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert "required by" not in result.stdout
    assert "(required)" not in result.stdout
