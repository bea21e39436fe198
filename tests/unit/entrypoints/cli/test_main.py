"""The ``fetcher`` command line as a new user meets it: version, help, one-line failures."""

from __future__ import annotations

import asyncio
import http.server
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from entrypoints import runners
from entrypoints.cli.healthcheck import local_health_urls
from entrypoints.cli.main import ROLES, build_parser
from entrypoints.listening import listen
from entrypoints.observability_settings import LogSettings
from entrypoints.settings import Settings, SettingsError, ToolSettings, listen_address
from entrypoints.settings_table import SETTINGS

FETCHER = Path(sys.executable).parent / "fetcher"
DATASOURCE = {
    "DATASOURCE_LEDGER_CONFIG_NAME": "ledger",
    "DATASOURCE_LEDGER_TYPE": "postgresql",
    "DATASOURCE_LEDGER_HOST": "db.internal",
    "DATASOURCE_LEDGER_DATABASE": "ledger",
}


def run_fetcher(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FETCHER), *args],
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_prints_the_installed_distributions_version(tmp_path):
    result = run_fetcher("--version", env={}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"fetcher {metadata.version('fetcher')}\n"


class RecordingEnv(dict[str, str]):
    """An environment that notes every variable the settings look up."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key, default=None):  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)


def test_the_settings_table_names_exactly_the_variables_the_roles_read():
    env = RecordingEnv(DATASOURCE)
    Settings.from_env(env)
    LogSettings.from_env(env)
    ToolSettings.from_env(env)
    read = {re.sub(r"^DATASOURCE_LEDGER_", "DATASOURCE_<X>_", name) for name in env.read}
    documented = {setting.name for setting in SETTINGS if setting.reader == "fetcher"}
    documented |= {alias for setting in SETTINGS for alias in setting.aliases}
    datasource_suffixes = {name for name in read if name.startswith("DATASOURCE_<X>_")}
    assert datasource_suffixes, "the internal datasource was not read"
    described = next(s.help for s in SETTINGS if s.name == "DATASOURCE_<X>_CONFIG_NAME")
    for name in datasource_suffixes - {"DATASOURCE_<X>_CONFIG_NAME"}:
        assert name.removeprefix("DATASOURCE_<X>") in described, name
    assert documented == (read - datasource_suffixes) | {"DATASOURCE_<X>_CONFIG_NAME"}


@pytest.mark.parametrize("role", list(ROLES))
def test_every_roles_help_lists_the_settings_it_reads(role, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([role, "--help"])
    text = capsys.readouterr().out
    listed = set(re.findall(r"^  ([A-Z][A-Z0-9_<>]+)", text, re.MULTILINE))
    assert listed == {s.name for s in SETTINGS if role in s.roles}
    assert ("SERVER_ADDRESS" in listed) == (role in ("serve", "api"))
    assert "APP_ENC_KEY" in listed and "FETCHER_DATABASE_URL" in listed


@pytest.mark.parametrize(
    ("setting", "loop_module"), [("", "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio")]
)
@pytest.mark.parametrize("role", list(ROLES))
def test_every_role_runs_on_the_event_loop_the_setting_chooses(
    role, setting, loop_module, monkeypatch
):
    ran_on: list[str] = []

    async def recording_role(settings: Settings) -> None:
        ran_on.append(type(asyncio.get_running_loop()).__module__.partition(".")[0])

    monkeypatch.setattr(runners, role, recording_role)
    monkeypatch.setenv("FETCHER_EVENT_LOOP", setting)
    for required in SETTINGS:
        if role in required.required_for:
            monkeypatch.setenv(required.name, required.example)
    args = build_parser().parse_args([role])
    assert args.func(args) == 0
    assert ran_on == [loop_module]


@pytest.mark.parametrize(
    ("raw", "address"),
    [
        ("", ("127.0.0.1", 4006)),
        ("4337", ("127.0.0.1", 4337)),
        (":4006", ("0.0.0.0", 4006)),
        ("0.0.0.0:8080", ("0.0.0.0", 8080)),
        ("[::1]:4006", ("::1", 4006)),
        ("db-host:4006", ("db-host", 4006)),
    ],
)
def test_a_bare_port_listens_on_loopback_only(raw, address):
    assert listen_address({"SERVER_ADDRESS": raw}) == address
    assert (Settings.from_env({"SERVER_ADDRESS": raw}).http.host, address[1]) == address


@pytest.mark.parametrize("raw", ["nope", "host:", "host:port", "4006x", "70000", "[::1]"])
def test_a_malformed_server_address_is_refused(raw):
    with pytest.raises(SettingsError, match="SERVER_ADDRESS"):
        listen_address({"SERVER_ADDRESS": raw})


@pytest.mark.parametrize("raw", ["", "INFO", "debug", "Warning", "warn", "error", "critical"])
def test_log_levels_are_read_in_any_case(raw):
    level = LogSettings.from_env({"LOG_LEVEL": raw}).level
    assert level in {logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL}


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"RABBITMQ_URL": "rabbit.internal:5672"}, "RABBITMQ_URL must be an amqp"),
        ({"RABBITMQ_URL": "http://rabbit.internal"}, "RABBITMQ_URL must be an amqp"),
        ({"OBJECT_STORAGE_ENDPOINT": "minio:9000", "OBJECT_STORAGE_BUCKET": "b"}, "ENDPOINT"),
    ],
)
def test_urls_of_the_wrong_kind_are_refused_by_name(env, fragment):
    with pytest.raises(SettingsError, match=fragment):
        Settings.from_env(env)


def test_an_address_in_use_is_refused_naming_the_setting():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SettingsError) as raised:
            listen("127.0.0.1", port, setting="SERVER_ADDRESS")
    assert str(raised.value) == (
        f"SERVER_ADDRESS 127.0.0.1:{port} cannot be listened on: the port is already in use "
        "(is another fetcher running?)"
    )


def one_error_line(result: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("fetcher: ")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


def test_a_bad_log_level_is_one_line(tmp_path):
    result = run_fetcher("serve", env={"LOG_LEVEL": "verbose"}, cwd=tmp_path)
    assert result.returncode == 2
    line = one_error_line(result, "fetcher: configuration error: LOG_LEVEL")
    assert "'verbose'" in line and "debug, info, warning, error, critical" in line


def test_a_port_in_use_is_one_line_and_nothing_claims_to_serve(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"SERVER_ADDRESS": f"127.0.0.1:{port}", "FETCHER_DATA_DIR": str(tmp_path / "var")}
        result = run_fetcher("serve", env=env, cwd=tmp_path)
    assert result.returncode == 2
    one_error_line(result, f"fetcher: configuration error: SERVER_ADDRESS 127.0.0.1:{port}")
    assert "serving on" not in result.stderr


def test_a_worker_started_without_its_broker_waits_and_says_so_in_one_line(tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        health_port = free.getsockname()[1]
    env = {
        "PATH": "/usr/bin:/bin",
        "FETCHER_DATABASE_URL": f"sqlite:///{tmp_path / 'fetcher.sqlite3'}",
        "OBJECT_STORAGE_BUCKET": "results",
        "RABBITMQ_URL": f"amqp://fetcher:hunter2@127.0.0.1:{port}/",
        "APP_ENC_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "FETCHER_DATA_DIR": str(tmp_path / "var"),
        "HEALTH_PORT": str(health_port),
        "READYZ_DRAIN_DELAY_SEC": "-1",
    }
    proc = subprocess.Popen(
        [str(FETCHER), "worker"], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    try:
        readyz = _poll_readyz(health_port, proc)
        assert readyz.status_code == 503
        rabbitmq = readyz.json()["checks"]["rabbitmq"]
        assert rabbitmq["status"] == "down" and "hunter2" not in readyz.text
        assert httpx.get(f"http://127.0.0.1:{health_port}/health").status_code == 503
        time.sleep(2.5)  # a few attempts, each still one line in all
        assert proc.poll() is None
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    waiting = [line for line in stderr.splitlines() if "waiting for" in line]
    assert len(waiting) == 1, stderr
    assert f"waiting for the message broker at 127.0.0.1:{port} (" in waiting[0]
    assert "Traceback" not in stderr and "ERROR" not in stderr
    assert "hunter2" not in stderr


def _poll_readyz(port: int, proc: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the worker exited"
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
            if response.json()["checks"].get("rabbitmq"):
                return response
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the worker never answered /readyz")


def test_an_uncreatable_data_folder_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_fetcher("serve", env={"FETCHER_DATA_DIR": str(blocker / "var")}, cwd=tmp_path)
    assert result.returncode == 2
    one_error_line(result, f"fetcher: configuration error: FETCHER_DATA_DIR {blocker / 'var'}")


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_healthcheck_passes_when_the_local_health_answers_200(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        env = {"SERVER_ADDRESS": "127.0.0.1:1", "HEALTH_PORT": str(port)}
        healthy = run_fetcher("healthcheck", env=env, cwd=tmp_path)
        assert healthy.returncode == 0, healthy.stderr
        assert healthy.stdout == f"healthy: http://127.0.0.1:{port}/health\n"
    finally:
        server.shutdown()
        server.server_close()
    down = run_fetcher("healthcheck", env=env, cwd=tmp_path)
    assert down.returncode == 1
    assert down.stderr.startswith("unhealthy: http://127.0.0.1:1/health: ")


def test_healthcheck_asks_the_api_address_and_the_health_port():
    assert local_health_urls({}) == [
        "http://127.0.0.1:4006/health",
        "http://127.0.0.1:4007/health",
    ]
    assert local_health_urls({"SERVER_ADDRESS": "[::]:80", "HEALTH_PORT": "9000"}) == [
        "http://[::1]:80/health",
        "http://127.0.0.1:9000/health",
    ]
    assert local_health_urls({"HEALTH_PORT": "0"})[1] == "http://127.0.0.1:4007/health"


def test_the_command_runs_from_any_directory(tmp_path):
    result = run_fetcher("keys", "storage", "--raw", env={}, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: No master key provided")
    assert os.listdir(tmp_path) == []
