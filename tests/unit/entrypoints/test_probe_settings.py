"""The probe settings read as the reference reads them (§6.1, §6.3)."""

from __future__ import annotations

from importlib import metadata

import pytest

from entrypoints.settings import ProbeSettings, Settings, SettingsError


def test_defaults():
    probes = Settings.from_env({}).probes
    assert probes == ProbeSettings(
        health_port=4007,
        drain_seconds=12,
        deployment_mode="local",
        version=metadata.version("fetcher"),
    )


@pytest.mark.parametrize(
    ("raw", "port"),
    [("", 4007), ("9100", 9100), ("65535", 65535), ("0", 4007), ("-1", 4007), ("65536", 4007)],
)
def test_health_port_out_of_range_falls_back_to_4007(raw, port):
    assert ProbeSettings.from_env({"HEALTH_PORT": raw}).health_port == port


@pytest.mark.parametrize(
    ("raw", "seconds"), [("", 12), ("0", 12), ("2", 2), ("30", 30), ("-1", 1), ("-40", 1)]
)
def test_drain_delay_unset_or_zero_is_12_and_negative_is_1(raw, seconds):
    assert ProbeSettings.from_env({"READYZ_DRAIN_DELAY_SEC": raw}).drain_seconds == seconds


@pytest.mark.parametrize("name", ["HEALTH_PORT", "READYZ_DRAIN_DELAY_SEC"])
def test_a_value_that_is_not_a_number_is_named(name):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: "soon"})


@pytest.mark.parametrize(
    ("raw", "mode"),
    [("", "local"), ("saas", "saas"), ("BYOC", "byoc"), (" Local ", "local"), ("cloud", "local")],
)
def test_deployment_mode_is_one_of_three_and_local_otherwise(raw, mode):
    assert ProbeSettings.from_env({"DEPLOYMENT_MODE": raw}).deployment_mode == mode


def test_the_reported_version_prefers_the_otel_resource_version():
    both = {"OTEL_RESOURCE_SERVICE_VERSION": "2.0.2", "VERSION": "1.0.0"}
    assert ProbeSettings.from_env(both).version == "2.0.2"
    assert ProbeSettings.from_env({"VERSION": "1.0.0"}).version == "1.0.0"
    blank = ProbeSettings.from_env({"OTEL_RESOURCE_SERVICE_VERSION": " "}).version
    assert blank == metadata.version("fetcher")  # the package's, as everywhere else
