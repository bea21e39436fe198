"""Tracing is off unless configured with the standard OTEL_* variables (or the reference's
ENABLE_TELEMETRY); a bad value is one line naming it."""

from __future__ import annotations

import pytest

from adapters.telemetry.otel_tracer import OpenTelemetryTracer
from application.ports.tracer import NO_TRACER
from entrypoints.observability_settings import TracingSettings
from entrypoints.roles import Role
from entrypoints.settings import Settings, SettingsError
from entrypoints.tracing import open_tracer, tracer_provider


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"ENABLE_TELEMETRY": "true"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "ENABLE_TELEMETRY": "false"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_tracing_is_on_only_when_configured(env, enabled):
    assert TracingSettings.from_env(env).enabled is enabled


def test_reference_and_standard_names_are_read():
    settings = TracingSettings.from_env(
        {
            "ENABLE_TELEMETRY": "true",
            "OTEL_INSECURE_EXPORTER": "true",
            "OTEL_RESOURCE_SERVICE_NAME": "fetcher-a",
            "OTEL_RESOURCE_SERVICE_VERSION": "2.0.2",
            "OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT": "staging",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }
    )
    assert settings == TracingSettings(
        enabled=True,
        exporter="otlp",
        protocol="http/protobuf",
        insecure=True,
        service_name="fetcher-a",
        service_version="2.0.2",
        deployment_environment="staging",
    )
    standard = TracingSettings.from_env(
        {"OTEL_SERVICE_NAME": "std", "OTEL_RESOURCE_SERVICE_NAME": "ref"}
    )
    assert standard.service_name == "std" and standard.protocol == "grpc"
    traces = TracingSettings.from_env(
        {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        }
    )
    assert traces.protocol == "http/protobuf"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
        ("ENABLE_TELEMETRY", "maybe"),
    ],
)
def test_a_bad_tracing_setting_names_the_variable(name, value, tmp_path):
    with pytest.raises(SettingsError, match=name):
        TracingSettings.from_env({name: value})
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path), name: value})


@pytest.mark.parametrize(
    ("roles", "name"),
    [
        ({Role.API, Role.WORKER, Role.RELAY}, "fetcher"),
        ({Role.API}, "fetcher"),
        ({Role.WORKER}, "fetcher-worker"),
        ({Role.RELAY}, "fetcher-relay"),
    ],
)
def test_each_role_names_its_service(roles, name):
    provider = tracer_provider(TracingSettings(enabled=True, exporter="console"), roles, "1.2.3")
    try:
        attributes = provider.resource.attributes
        assert attributes["service.name"] == name
        assert attributes["service.version"] == "1.2.3"
    finally:
        provider.shutdown()


async def test_no_tracer_when_tracing_is_off():
    async with open_tracer(TracingSettings(), {Role.API}, version="0") as tracer:
        assert tracer is NO_TRACER


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
async def test_an_otlp_tracer_when_tracing_is_on(protocol):
    settings = TracingSettings(enabled=True, protocol=protocol, insecure=True)
    async with open_tracer(settings, {Role.WORKER}, version="0") as tracer:
        assert isinstance(tracer, OpenTelemetryTracer)
        assert tracer.carrier() == {}  # no span yet (and none to export at exit)


async def test_spans_carry_their_context_as_w3c_headers():
    settings = TracingSettings(enabled=True, exporter="console")
    async with open_tracer(settings, {Role.WORKER}, version="0") as tracer:
        with tracer.span("job.run", kind="consumer"):
            outer = tracer.carrier()["traceparent"]
        with tracer.span("job.claim", parent={"traceparent": outer}):
            inner = tracer.carrier()["traceparent"]
    assert outer.startswith("00-") and inner.split("-")[1] == outer.split("-")[1]
    assert inner != outer
