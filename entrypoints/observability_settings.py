"""Settings of logs (``LOG_LEVEL``, ``LOG_FORMAT``) and traces (the standard ``OTEL_*``
variables and the reference's ``ENABLE_TELEMETRY``). Logs are set up before anything else,
so ``LogSettings`` is read on its own; ``TracingSettings`` is part of ``Settings``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from entrypoints.settings_reader import Environment
from entrypoints.settings_table import SettingsError

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
CANONICAL_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True, slots=True)
class LogSettings:
    level: int = logging.INFO
    """``LOG_LEVEL``: debug, info, warning (warn), error or critical; default info."""
    format: str = "text"
    """``LOG_FORMAT``: ``text`` (one line, ``key=value`` fields) or ``json`` (one object per
    line); the same fields either way."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment | None = None) -> LogSettings:
        """From ``env``, the process environment by default."""
        read = Environment.of(env)
        name = "LOG_LEVEL"
        raw = read.raw(name)
        if raw is not None and raw.lower() not in LEVELS:
            listed = ", ".join(CANONICAL_LEVELS)
            raise SettingsError(f"{name} must be one of {listed}, got {raw!r}")
        return cls(level=LEVELS[read.choice(name)], format=read.choice("LOG_FORMAT"))


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """OpenTelemetry tracing, off unless configured.

    On when ``ENABLE_TELEMETRY=true``, an OTLP endpoint is set
    (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or
    ``OTEL_TRACES_EXPORTER`` names an exporter; off when ``ENABLE_TELEMETRY=false``,
    ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. The exporter itself reads the
    other standard variables (headers, timeout, certificates, ``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``).
    """

    enabled: bool = False
    exporter: str = "otlp"
    """``OTEL_TRACES_EXPORTER``: ``otlp`` or ``console`` (spans printed to standard output)."""
    protocol: str = "grpc"
    """``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``grpc`` (the
    reference's, ``host:4317``) or ``http/protobuf`` (``http://host:4318``)."""
    insecure: bool | None = None
    """``OTEL_INSECURE_EXPORTER`` (the reference's name): plaintext gRPC to the collector."""
    service_name: str | None = None
    """``OTEL_SERVICE_NAME``, or the reference's ``OTEL_RESOURCE_SERVICE_NAME``; by default
    ``fetcher`` (API or all roles), ``fetcher-worker`` or ``fetcher-relay``."""
    service_version: str | None = None
    """``OTEL_RESOURCE_SERVICE_VERSION``; by default ``VERSION``."""
    deployment_environment: str | None = None
    """``OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT``."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | Environment) -> TracingSettings:
        read = Environment.of(env)
        exporter = read.choice("OTEL_TRACES_EXPORTER") if read.raw("OTEL_TRACES_EXPORTER") else ""
        protocol = read.choice("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or read.choice(
            "OTEL_EXPORTER_OTLP_PROTOCOL"
        )
        endpoint = any(
            read.raw(name)
            for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
        wanted = read.maybe_flag("ENABLE_TELEMETRY")
        enabled = wanted if wanted is not None else endpoint or exporter in ("otlp", "console")
        if read.flag("OTEL_SDK_DISABLED") or exporter == "none":
            enabled = False
        return cls(
            enabled=bool(enabled),
            exporter=exporter or "otlp",
            protocol=protocol,
            insecure=read.maybe_flag("OTEL_INSECURE_EXPORTER"),
            service_name=read.optional("OTEL_SERVICE_NAME"),
            service_version=read.optional("OTEL_RESOURCE_SERVICE_VERSION"),
            deployment_environment=read.optional("OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT"),
        )
