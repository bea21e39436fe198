"""deploy/Dockerfile: lint-clean, multi-stage, pinned, non-root, with the SQL Server client
libraries and a HEALTHCHECK; and its install step gives a working `fetcher` in a clean venv."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from tests.deploy.conftest import BIN, DEPLOY, ROOT

DOCKERFILE = DEPLOY / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, rest))
    return result


def test_hadolint_finds_nothing():
    result = subprocess.run(
        [str(BIN / "hadolint"), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_base_image_is_pinned_to_an_exact_tag_or_digest():
    arguments = [rest for keyword, rest in instructions() if keyword == "ARG"]
    name, _, image = arguments[0].partition("=")
    assert name == "PYTHON_IMAGE"
    assert "@sha256:" in image or re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", image), image
    froms = [rest for keyword, rest in instructions() if keyword == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]


def test_the_runtime_stage_is_slim_non_root_and_checks_its_health():
    runtime = dict(stages()[-1])
    assert re.fullmatch(r"\d+:\d+", runtime["USER"]) and not runtime["USER"].startswith("0")
    for library in ("unixodbc", "tdsodbc"):
        assert f" {library}" in runtime["RUN"], library
    assert "--no-install-recommends" in runtime["RUN"]
    assert "rm -rf /var/lib/apt/lists/*" in runtime["RUN"]
    assert runtime["COPY"] == "--from=build /opt/fetcher /opt/fetcher"
    assert "gcc" not in runtime["RUN"]  # nothing to build with in the final image
    assert runtime["HEALTHCHECK"].endswith('CMD ["fetcher", "healthcheck"]')
    assert runtime["ENTRYPOINT"] == '["fetcher"]'


def test_the_sources_come_last_so_every_other_layer_is_cached():
    build, runtime = stages()
    assert [k for k, _ in build][-2:] == ["COPY", "RUN"]
    assert runtime[-1] == ("COPY", "--from=build /opt/fetcher /opt/fetcher")
    assert sum(1 for k, _ in runtime if k in ("RUN", "COPY")) == 2


def build_stage_sources() -> tuple[list[str], list[str]]:
    """What the build stage copies from the context (``.``: what .dockerignore lets in), and
    the arguments of its install step."""
    build = stages()[0]
    copies = [rest for keyword, rest in build if keyword == "COPY"]
    assert copies == [". /src"]
    sources = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    run = [rest for keyword, rest in build if keyword == "RUN"]
    assert len(run) == 1 and run[0].startswith("sh /src/deploy/install.sh ")
    return sources, run[0].split()[2:]


def test_the_build_context_holds_what_the_package_is_built_from_and_the_install_step():
    sources, _ = build_stage_sources()
    assert set(sources) == {
        "pyproject.toml",
        "README.md",
        "domain",
        "application",
        "adapters",
        "entrypoints",
        "deploy/install.sh",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(600)
def test_the_images_install_step_gives_a_working_fetcher(tmp_path: Path):
    """deploy/install.sh, as the Dockerfile runs it, on a copy of exactly the files the image
    copies, into a new venv; then the command works from another folder, serves the API and
    the OpenAPI page's assets (package data of its dependencies)."""
    sources, (source_arg, prefix_arg) = build_stage_sources()
    context = tmp_path / "context"
    for source in sources:
        origin = ROOT / source
        target = context / "src" / source
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)
    assert (source_arg, prefix_arg) == ("/src", "/opt/fetcher")
    prefix = tmp_path / "opt" / "fetcher"
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    install = subprocess.run(
        ["sh", str(context / "src" / "deploy" / "install.sh"), str(context / "src"), str(prefix)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert install.stdout.strip().endswith(f"fetcher {metadata.version('fetcher')}")
    site = next((prefix / "lib").glob("python3*/site-packages"))
    for left_out in ("pip", "setuptools", "faker", "polyfactory", "pygments", "grpc"):
        assert not (site / left_out).exists(), left_out
    assert sorted(p.name for p in (site / "botocore" / "data").iterdir() if p.is_dir()) == [
        "s3",
        "sso",
        "sso-oidc",
        "sts",
    ]

    fetcher = str(prefix / "bin" / "fetcher")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    version = subprocess.run(
        [fetcher, "--version"], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert version.stdout == f"fetcher {metadata.version('fetcher')}\n", version.stderr
    layers = subprocess.run(
        [
            str(prefix / "bin" / "python"),
            "-c",
            "import domain, entrypoints; print(domain.__file__); print(entrypoints.__file__)",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    for line in layers.stdout.splitlines():
        assert Path(line).is_relative_to(prefix), line  # installed, not this checkout's

    port = free_port()
    serve_env = {
        **{
            k: v
            for k, v in env.items()
            if not k.startswith(("FETCHER_", "RABBITMQ_", "APP_", "OBJECT_STORAGE_"))
        },
        "SERVER_ADDRESS": f"127.0.0.1:{port}",
        "FETCHER_DATA_DIR": str(tmp_path / "data"),
    }
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen(
        [fetcher, "serve"], cwd=elsewhere, env=serve_env, stdout=log, stderr=log
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        assert "SwaggerUIBundle" in httpx.get(f"{base}/openapi").text
        assert httpx.get(f"{base}/openapi/assets/swagger-ui.css").status_code == 200
        # The console's templates and script are package data: installed, not read from here.
        assert 'name="fetcher-console"' in httpx.get(f"{base}/console").text
        assert httpx.get(f"{base}/console-assets/console.js").status_code == 200
        assert '<section class="jobs"' in httpx.get(f"{base}/v1/console/jobs").text
        healthcheck = subprocess.run(
            [fetcher, "healthcheck"], cwd=elsewhere, env=serve_env, capture_output=True, text=True
        )
        assert healthcheck.returncode == 0, healthcheck.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
