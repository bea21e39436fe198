"""Log lines as records: one event and its fields, the same in text and JSON; bad settings
are one line naming the variable."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from application.log_context import bind_log_fields, current_log_fields, log_fields
from entrypoints.cli.main import main
from entrypoints.logs import configure_logging
from entrypoints.observability_settings import LogSettings
from entrypoints.settings import SettingsError

TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (?P<level>[A-Z]+) (?P<logger>\S+): "
    r"(?P<event>\S+)(?P<fields>.*)$"
)


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def emit(fmt: str) -> str:
    out = io.StringIO()
    configure_logging(LogSettings(format=fmt), out)
    log = logging.getLogger("fetcher.test")
    with log_fields(job_id="0190b8a0-0000-7000-8000-000000000001", request_id="req-1"):
        log.info(
            "job.completed",
            extra={"rows": 10, "bytes": 1234, "duration_ms": 56, "error": 'says "no" = bad'},
        )
    return out.getvalue()


def text_fields(line: str) -> dict[str, object]:
    match = TEXT_LINE.match(line)
    assert match, line
    fields: dict[str, object] = {}
    for key, value in re.findall(r' (\w+)=("(?:[^"\\]|\\.)*"|\S+)', match["fields"]):
        fields[key] = json.loads(value) if value.startswith('"') else value
    return {"level": match["level"], "logger": match["logger"], "event": match["event"], **fields}


def test_text_and_json_lines_carry_the_same_event_and_fields(restore_root):
    text = text_fields(emit("text").strip())
    record = json.loads(emit("json"))
    assert record.pop("time").endswith("Z")
    assert {k: str(v) for k, v in record.items()} == {k: str(v) for k, v in text.items()}
    assert record == {
        "level": "INFO",
        "logger": "fetcher.test",
        "event": "job.completed",
        "job_id": "0190b8a0-0000-7000-8000-000000000001",
        "request_id": "req-1",
        "rows": 10,
        "bytes": 1234,
        "duration_ms": 56,
        "error": 'says "no" = bad',
    }


def test_fields_of_the_unit_of_work_end_with_it(restore_root):
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), out)
    log = logging.getLogger("fetcher.test")
    with log_fields(request_id="outer"):
        with log_fields(job_id="j1", tenant=None):
            log.info("inside")
        log.info("after")
    log.info("outside")
    inside, after, outside = (json.loads(line) for line in out.getvalue().splitlines())
    assert (inside["job_id"], inside["request_id"]) == ("j1", "outer")
    assert "tenant" not in inside
    assert "job_id" not in after and after["request_id"] == "outer"
    assert "request_id" not in outside
    assert current_log_fields() == {}


def test_a_line_inside_a_span_names_its_trace(restore_root):
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), out)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        logging.getLogger("fetcher.test").warning("traced")
    line = json.loads(out.getvalue())
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert line["level"] == "WARNING"


def test_configuring_again_replaces_only_its_own_handler(restore_root):
    other = logging.NullHandler()
    logging.getLogger().addHandler(other)
    first = configure_logging(LogSettings(), io.StringIO())
    second = configure_logging(LogSettings(level=logging.WARNING), io.StringIO())
    handlers = logging.getLogger().handlers
    assert other in handlers and second in handlers and first not in handlers
    assert logging.getLogger().level == logging.WARNING


def test_a_bound_field_stays_for_the_rest_of_the_scope():
    with log_fields(request_id="r"):
        bind_log_fields(job_id="j")
        assert current_log_fields() == {"request_id": "r", "job_id": "j"}
    assert current_log_fields() == {}


@pytest.mark.parametrize(
    ("env", "level", "fmt"),
    [
        ({}, logging.INFO, "text"),
        ({"LOG_LEVEL": "DEBUG", "LOG_FORMAT": "JSON"}, logging.DEBUG, "json"),
        ({"LOG_LEVEL": "warn"}, logging.WARNING, "text"),
        ({"LOG_LEVEL": " error "}, logging.ERROR, "text"),
    ],
)
def test_log_settings_from_env(env, level, fmt):
    assert LogSettings.from_env(env) == LogSettings(level=level, format=fmt)


@pytest.mark.parametrize(
    ("name", "value"), [("LOG_LEVEL", "verbose"), ("LOG_FORMAT", "xml"), ("LOG_LEVEL", "10")]
)
def test_an_invalid_log_setting_names_the_variable_and_value(name, value):
    with pytest.raises(SettingsError) as error:
        LogSettings.from_env({name: value})
    assert name in str(error.value) and repr(value) in str(error.value)


def test_an_invalid_log_level_is_one_line_and_exit_code_2(monkeypatch, capsys, restore_root):
    monkeypatch.setenv("LOG_LEVEL", "verbose")
    assert main(["keys", "storage"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("fetcher: configuration error: LOG_LEVEL must be one of")
    assert "Traceback" not in err


@pytest.mark.usefixtures("restore_root")
@pytest.mark.parametrize("level", ["info", "debug"])
def test_connection_libraries_lines_show_only_at_debug(level):
    out = io.StringIO()
    configure_logging(LogSettings(level=getattr(logging, level.upper())), out)
    try:
        raise ConnectionResetError(104, "Connection reset by peer")
    except ConnectionResetError:
        logging.getLogger("aiormq.connection").warning("reader exited", exc_info=True)
    logging.getLogger("aio_pika.robust_connection").error("Reconnecting after 5 seconds")
    logging.getLogger("botocore.retries").error("retrying")
    logging.getLogger("sqlalchemy.pool.impl.AsyncAdaptedQueuePool").error("reset failed")
    logging.getLogger("sqlalchemy.engine.Engine").warning("engine line")
    logging.getLogger("adapters.messaging.rabbitmq").warning("message broker connection lost")
    text = out.getvalue()
    assert "message broker connection lost" in text and "engine line" in text
    quiet = ("reader exited", "Reconnecting after", "retrying", "reset failed", "Traceback")
    if level == "info":
        assert not any(line in text for line in quiet), text
    else:
        assert all(line in text for line in quiet), text
