from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from entrypoints import settings as settings_module
from entrypoints.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[3]


def test_defaults_are_the_embedded_default():
    settings = Settings.from_env({})
    assert settings.database.postgres is None and not settings.database.configured
    assert settings.broker.url is None
    assert not settings.storage.uses_s3
    assert (settings.http.host, settings.http.port) == ("127.0.0.1", 4006)
    assert settings.broker.work_queue == "fetcher.extract-external-data.queue"
    assert settings.broker.events_exchange == "fetcher.job.events"
    assert settings.engine.max_result_bytes == 268_435_456
    assert settings.data_dir.name == "var"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"SERVER_ADDRESS": "nope"}, "SERVER_ADDRESS"),
        ({"FETCHER_DATABASE_URL": "mysql://x"}, "FETCHER_DATABASE_URL"),
        ({"OBJECT_STORAGE_ENDPOINT": "http://s3"}, "OBJECT_STORAGE_BUCKET"),
        (
            {"OBJECT_STORAGE_BUCKET": "b", "OBJECT_STORAGE_ACCESS_KEY_ID": "a"},
            "OBJECT_STORAGE_SECRET_KEY",
        ),
        ({"RABBITMQ_NUMBERS_OF_WORKERS": "many"}, "RABBITMQ_NUMBERS_OF_WORKERS"),
        ({"ENGINE_MAX_RESULT_BYTES": "big"}, "ENGINE_MAX_RESULT_BYTES"),
    ],
)
def test_invalid_settings_name_the_variable(env, fragment):
    with pytest.raises(SettingsError, match=fragment):
        Settings.from_env(env)


def test_the_database_url_is_parsed_once_into_its_parts():
    url = "postgresql://fetcher:p%40ss@db.internal:6543/jobs?application_name=fetcher"
    database = Settings.from_env({"FETCHER_DATABASE_URL": url}).database
    assert database.configured and database.postgres is not None
    pg = database.postgres
    assert (pg.host, pg.port, pg.user, pg.password, pg.database) == (
        "db.internal",
        6543,
        "fetcher",
        "p@ss",
        "jobs",
    )
    assert pg.options == (("application_name", "fetcher"),)
    assert "p@ss" not in repr(database)


def test_sqlite_files_default_to_the_data_folder_or_the_one_url_file(tmp_path):
    default = Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path)}).database
    assert default.postgres is None
    assert default.event_store_file == tmp_path / "fetcher.sqlite3"
    assert default.sql_file == tmp_path / "fetcher-data.sqlite3"
    one = Settings.from_env({"FETCHER_DATABASE_URL": f"sqlite:///{tmp_path}/one.db"}).database
    assert one.configured and one.event_store_file == one.sql_file == tmp_path / "one.db"


@pytest.mark.parametrize(
    "url", ["postgresql://postgres@127.0.0.1:5432", "postgresql://h:99999/db", "memory://"]
)
def test_an_unusable_database_url_is_a_settings_error(url):
    with pytest.raises(SettingsError, match="FETCHER_DATABASE_URL"):
        Settings.from_env({"FETCHER_DATABASE_URL": url})


def test_request_deadlines_default_to_ten_and_thirty_seconds():
    http = Settings.from_env({}).http
    assert (http.header_timeout_seconds, http.body_timeout_seconds) == (10.0, 30.0)
    http = Settings.from_env(
        {"FETCHER_HTTP_HEADER_TIMEOUT_SECONDS": "3", "FETCHER_HTTP_BODY_TIMEOUT_SECONDS": "120"}
    ).http
    assert (http.header_timeout_seconds, http.body_timeout_seconds) == (3.0, 120.0)


@pytest.mark.parametrize(
    "name", ["FETCHER_HTTP_HEADER_TIMEOUT_SECONDS", "FETCHER_HTTP_BODY_TIMEOUT_SECONDS"]
)
@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_request_deadlines_must_be_positive_integers(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


def test_the_event_loop_is_uvloop_unless_asyncio_is_asked_for():
    assert Settings.from_env({}).event_loop == "uvloop"
    assert Settings.from_env({"FETCHER_EVENT_LOOP": " UVLOOP "}).event_loop == "uvloop"
    assert Settings.from_env({"FETCHER_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"


def test_without_uvloop_the_event_loop_is_asyncio_and_asking_for_uvloop_is_refused(monkeypatch):
    monkeypatch.setattr(settings_module, "find_spec", lambda name: None)
    assert Settings.from_env({}).event_loop == "asyncio"
    assert Settings.from_env({"FETCHER_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"
    with pytest.raises(SettingsError, match="FETCHER_EVENT_LOOP is uvloop, which is not installed"):
        Settings.from_env({"FETCHER_EVENT_LOOP": "uvloop"})


@pytest.mark.parametrize("value", ["trio", "selector", "1"])
def test_an_unknown_event_loop_is_refused_by_name(value):
    with pytest.raises(SettingsError, match="FETCHER_EVENT_LOOP must be one of uvloop, asyncio"):
        Settings.from_env({"FETCHER_EVENT_LOOP": value})


def test_non_positive_result_limit_keeps_the_default():
    assert (
        Settings.from_env({"ENGINE_MAX_RESULT_BYTES": "0"}).engine.max_result_bytes == 268_435_456
    )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:5672/"},
            "fetcher: configuration error: APP_ENC_KEY is required",
        ),
        ({"APP_ENC_KEY": "c2hvcnQ="}, "fetcher: configuration error: APP_ENC_KEY is invalid"),
        ({"SERVER_ADDRESS": "x"}, "fetcher: configuration error: SERVER_ADDRESS"),
    ],
)
def test_start_up_stops_with_one_clear_line(env, line, tmp_path):
    result = subprocess.run(
        [str(Path(sys.executable).parent / "fetcher"), "serve"],
        env={"PATH": "/usr/bin:/bin", "FETCHER_DATA_DIR": str(tmp_path), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    errors = [x for x in result.stderr.splitlines() if "configuration error" in x]
    assert len(errors) == 1 and errors[0].startswith(line)
    assert "guest:guest" not in result.stderr
