"""`deploy/services.sh env` prints the settings the service reads for this machine's servers
(so that `eval "$(deploy/services.sh env)"` lets the roles run against them), and the names the
tests read."""

from __future__ import annotations

import subprocess

from entrypoints.cli.settings_help import SETTINGS
from entrypoints.settings import Settings
from tests.deploy.conftest import DEPLOY


def printed() -> dict[str, str]:
    result = subprocess.run(
        ["bash", str(DEPLOY / "services.sh"), "env"], capture_output=True, text=True, check=True
    )
    exports = {}
    for line in result.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        assert line.startswith("export ") and name and value, line
        exports[name] = value
    return exports


def test_it_prints_the_settings_the_service_reads_and_the_tests_names():
    exports = printed()
    known = {setting.name for setting in SETTINGS}
    service = {name for name in exports if not name.startswith("FETCHER_TEST_")}
    assert service <= known, service - known
    assert {"OBJECT_STORAGE_ENDPOINT", "OBJECT_STORAGE_BUCKET", "RABBITMQ_URL"} <= service
    assert exports["OBJECT_STORAGE_ENDPOINT"] == exports["FETCHER_TEST_S3_ENDPOINT"]
    assert exports["OBJECT_STORAGE_BUCKET"] == exports["FETCHER_TEST_S3_BUCKET"]
    assert exports["OBJECT_STORAGE_ACCESS_KEY_ID"] == exports["FETCHER_TEST_S3_ACCESS_KEY"]
    assert exports["OBJECT_STORAGE_SECRET_KEY"] == exports["FETCHER_TEST_S3_SECRET_KEY"]


def test_the_printed_settings_give_the_roles_every_shared_dependency():
    env = {k: v for k, v in printed().items() if not k.startswith("FETCHER_TEST_")}
    settings = Settings.from_env(
        {**env, "APP_ENC_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
    )
    assert settings.database.postgres is not None
    assert settings.broker.url == "amqp://guest:guest@127.0.0.1:5672/"
    assert settings.storage.uses_s3 and settings.storage.path_style
