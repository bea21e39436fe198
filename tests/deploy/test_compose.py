"""deploy/compose.yaml: valid against the Compose Specification's schema (vendored: no network),
and wired as the docs say: RabbitMQ loads the reference topology and the roles declare it too,
a one-shot job creates the bucket before any role starts, PostgreSQL holds the walk-through's
source table and is published, the worker can be scaled, ports stay on loopback.
tests/e2e/test_compose_walkthrough.py runs the walk-through's requests on the same settings."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from entrypoints.cli.settings_help import SETTINGS
from entrypoints.settings import Settings
from tests.deploy.conftest import BIN, DEPLOY

sys.path.insert(0, str(DEPLOY))
from walkthrough_db import STATEMENTS as WALKTHROUGH_TABLE

COMPOSE = DEPLOY / "compose.yaml"
ROLES = ("api", "worker", "relay")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_the_compose_file_is_valid_against_the_vendored_schema():
    result = subprocess.run(
        [
            str(BIN / "check-jsonschema"),
            "--schemafile",
            str(DEPLOY / "schemas" / "compose-spec.json"),
            str(COMPOSE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_it_brings_up_the_three_dependencies_a_bucket_job_and_the_three_roles(compose):
    assert set(compose["services"]) == {
        "postgres",
        "rabbitmq",
        "minio",
        "create-bucket",
        *ROLES,
    }
    for role in ROLES:
        service = compose["services"][role]
        assert service["command"] == [role]
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert service["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "rabbitmq": {"condition": "service_healthy"},
            "create-bucket": {"condition": "service_completed_successfully"},
        }
    for dependency in ("postgres", "rabbitmq", "minio"):
        assert "healthcheck" in compose["services"][dependency], dependency


def test_every_image_is_pinned_to_an_exact_tag(compose):
    for name, service in compose["services"].items():
        image = service["image"]
        if name in ROLES:
            assert image == "fetcher:local"
            continue
        tag = image.rsplit(":", 1)[1]
        assert tag not in ("latest", "") and any(ch.isdigit() for ch in tag), (name, image)


def test_rabbitmq_loads_the_reference_definitions_and_a_local_user(compose):
    mounts = compose["services"]["rabbitmq"]["volumes"]
    assert "./rabbitmq/definitions.json:/etc/rabbitmq/definitions.d/10-topology.json:ro" in mounts
    assert "./compose/rabbitmq-users.json:/etc/rabbitmq/definitions.d/20-users.json:ro" in mounts
    config = (DEPLOY / "compose" / "rabbitmq.conf").read_text()
    assert "load_definitions = /etc/rabbitmq/definitions.d" in config.splitlines()
    users = json.loads((DEPLOY / "compose" / "rabbitmq-users.json").read_text())
    assert [u["name"] for u in users["users"]] == ["fetcher"]
    url = compose["x-fetcher-environment"]["RABBITMQ_URL"]
    assert url.startswith("amqp://fetcher:")


def test_the_bucket_is_created_once_before_the_roles_start(compose):
    job = compose["services"]["create-bucket"]
    assert job["restart"] == "no"
    assert job["depends_on"] == {"minio": {"condition": "service_healthy"}}
    bucket = compose["x-fetcher-environment"]["OBJECT_STORAGE_BUCKET"]
    assert f"mc mb --ignore-existing local/{bucket}" in job["command"][0]


def test_the_worker_scales_and_nothing_is_published_beyond_loopback(compose):
    worker = compose["services"]["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert worker["deploy"]["replicas"] >= 2
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)
    assert compose["services"]["api"]["ports"] == ["127.0.0.1:4006:4006"]


DECLARE_TOPOLOGY = "FETCHER_BROKER_DECLARE_TOPOLOGY"


def test_the_roles_environment_is_valid_and_names_only_known_settings(compose):
    known = {setting.name for setting in SETTINGS}
    for role in ROLES:
        env = {k: str(v) for k, v in compose["services"][role]["environment"].items()}
        assert set(env) <= known, set(env) - known
        assert env[DECLARE_TOPOLOGY] == "true"
        env["APP_ENC_KEY"] = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
        settings = Settings.from_env(env)
        assert settings.database.postgres is not None and settings.broker.url
        assert settings.storage.uses_s3 and settings.storage.path_style
    assert compose["services"]["api"]["environment"]["SERVER_ADDRESS"] == "0.0.0.0:4006"


WALKTHROUGH = DEPLOY / "compose" / "walkthrough"


def _sql(text: str) -> list[str]:
    """SQL statements, whitespace and comments aside."""
    text = re.sub(r"--[^\n]*", "", text)
    return [" ".join(s.split()) for s in text.split(";") if s.strip()]


def test_postgres_is_published_on_loopback_and_seeds_the_walkthrough_once(compose):
    postgres = compose["services"]["postgres"]
    assert postgres["ports"] == ["127.0.0.1:${POSTGRES_PORT:-5432}:5432"]
    init = "./compose/walkthrough/source-db.sql:/docker-entrypoint-initdb.d/10-walkthrough.sql:ro"
    assert init in postgres["volumes"]
    script = (WALKTHROUGH / "source-db.sql").read_text()
    head, _, table = script.partition("\\connect test")
    assert _sql(head) == [
        "CREATE ROLE postgres LOGIN PASSWORD 'unused-with-trust'",
        "CREATE DATABASE test OWNER postgres",
    ]
    # the same table `make walkthrough-db` creates elsewhere
    assert _sql(table) == ["SET ROLE postgres", *(_sql(";".join(WALKTHROUGH_TABLE)))]


def test_the_walkthroughs_connection_reaches_the_source_as_the_containers_see_it(compose):
    connection = json.loads((WALKTHROUGH / "connection.json").read_text())
    assert connection["host"] in compose["services"]  # a service name, not 127.0.0.1
    assert compose["services"][connection["host"]]["image"].startswith("postgres:")
    assert (connection["port"], connection["databaseName"], connection["userName"]) == (
        5432,
        "test",
        "postgres",
    )
    assert f"PASSWORD '{connection['password']}'" in (WALKTHROUGH / "source-db.sql").read_text()
    job = json.loads((WALKTHROUGH / "job.json").read_text())
    (mapped,) = job["dataRequest"]["mappedFields"]
    assert mapped == connection["configName"]
    assert job["dataRequest"]["mappedFields"][mapped] == {"public.walkthrough_accounts": ["*"]}
