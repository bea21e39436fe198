"""Settings of logs (``LOG_LEVEL``, ``LOG_FORMAT``) and traces (the standard ``OTEL_*``
variables and the reference's ``ENABLE_TELEMETRY``). Logs are set up before anything else,
so ``LogSettings`` is read on its own; ``TracingSettings`` is part of ``Settings``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

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
FORMATS = ("text", "json")
TRACE_EXPORTERS = ("otlp", "console", "none")
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
_TRUE = {"1", "t", "true", "yes", "y", "on"}
_FALSE = {"0", "f", "false", "no", "n", "off"}


class ObservabilitySettingsError(ValueError):
    """An invalid log or trace setting; the message names the variable."""


def _choice(
    env: Mapping[str, str],
    name: str,
    allowed: tuple[str, ...],
    default: str,
    shown: tuple[str, ...] | None = None,
) -> str:
    """The setting, lower-cased, one of ``allowed``; the error lists ``shown`` (the canonical
    values, when ``allowed`` also takes aliases)."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() not in allowed:
        listed = ", ".join(shown or allowed)
        raise ObservabilitySettingsError(f"{name} must be one of {listed}, got {raw!r}")
    return raw.lower()


def _flag(env: Mapping[str, str], name: str) -> bool | None:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return None
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ObservabilitySettingsError(f"{name} must be a boolean (true/false), got {raw!r}")


@dataclass(frozen=True, slots=True)
class LogSettings:
    level: int = logging.INFO
    """``LOG_LEVEL``: debug, info, warning (warn), error or critical; default info."""
    format: str = "text"
    """``LOG_FORMAT``: ``text`` (one line, ``key=value`` fields) or ``json`` (one object per
    line); the same fields either way."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LogSettings:
        level = _choice(env, "LOG_LEVEL", tuple(LEVELS), "info", shown=CANONICAL_LEVELS)
        return cls(level=LEVELS[level], format=_choice(env, "LOG_FORMAT", FORMATS, "text"))


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
    def from_env(cls, env: Mapping[str, str]) -> TracingSettings:
        exporter = _choice(env, "OTEL_TRACES_EXPORTER", TRACE_EXPORTERS, "")
        protocol_name = (
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
            if env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
            else "OTEL_EXPORTER_OTLP_PROTOCOL"
        )
        protocol = _choice(env, protocol_name, OTLP_PROTOCOLS, "grpc")
        endpoint = any(
            env.get(name, "").strip()
            for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
        wanted = _flag(env, "ENABLE_TELEMETRY")
        enabled = wanted if wanted is not None else endpoint or exporter in ("otlp", "console")
        if _flag(env, "OTEL_SDK_DISABLED") or exporter == "none":
            enabled = False
        return cls(
            enabled=bool(enabled),
            exporter=exporter or "otlp",
            protocol=protocol,
            insecure=_flag(env, "OTEL_INSECURE_EXPORTER"),
            service_name=env.get("OTEL_SERVICE_NAME", "").strip()
            or env.get("OTEL_RESOURCE_SERVICE_NAME", "").strip()
            or None,
            service_version=env.get("OTEL_RESOURCE_SERVICE_VERSION", "").strip() or None,
            deployment_environment=env.get("OTEL_RESOURCE_DEPLOYMENT_ENVIRONMENT", "").strip()
            or None,
        )
