"""Settings read from the environment once, in the composition root, one object per concern.

Names follow the reference service where the concept is the same. A missing or invalid
required setting raises ``SettingsError`` naming it; ``fetcher`` prints that one line and exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoints.connection_settings import ConnectionSettings, ConnectionSettingsError


class SettingsError(Exception):
    pass


def _int(env: Mapping[str, str], name: str, default: int, *, positive: bool = True) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if positive and value <= 0:
        raise SettingsError(f"{name} must be a positive integer, got {raw!r}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "t", "true", "yes", "y", "on"}:
        return True
    if raw in {"0", "f", "false", "no", "n", "off"}:
        return False
    raise SettingsError(f"{name} must be a boolean (true/false), got {raw!r}")


@dataclass(frozen=True, slots=True)
class HttpSettings:
    host: str
    port: int
    header_timeout_seconds: float = 10.0
    """Time a client has to send a request's headers (from connecting, or from the first byte
    of a following request); then 408 and the connection is closed."""
    body_timeout_seconds: float = 30.0
    """Time a client has to send a request's body once its headers are in; then 408."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpSettings:
        raw = env.get("SERVER_ADDRESS", "").strip() or "127.0.0.1:4006"
        host, _, port = raw.rpartition(":")
        try:
            number = int(port)
        except ValueError:
            raise SettingsError(f"SERVER_ADDRESS must be host:port, got {raw!r}") from None
        if not 0 < number < 65536:
            raise SettingsError(f"SERVER_ADDRESS port out of range: {raw!r}")
        return cls(
            host=host or "0.0.0.0",
            port=number,
            header_timeout_seconds=float(_int(env, "FETCHER_HTTP_HEADER_TIMEOUT_SECONDS", 10)),
            body_timeout_seconds=float(_int(env, "FETCHER_HTTP_BODY_TIMEOUT_SECONDS", 30)),
        )


@dataclass(frozen=True, slots=True)
class KeySettings:
    master_key: str | None = field(repr=False)
    version: str
    previous: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KeySettings:
        return cls(
            master_key=env.get("APP_ENC_KEY", "").strip() or None,
            version=env.get("APP_ENC_KEY_VERSION", "").strip() or "1",
            previous=env.get("APP_ENC_KEYS_PREVIOUS", "").strip(),
        )


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    url: str | None = field(repr=False)
    work_queue: str
    events_exchange: str
    cloudevents_source: str
    workers: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BrokerSettings:
        return cls(
            url=env.get("RABBITMQ_URL", "").strip() or None,
            work_queue=env.get("RABBITMQ_FETCHER_WORK_QUEUE", "").strip()
            or "fetcher.extract-external-data.queue",
            events_exchange=env.get("RABBITMQ_JOB_EVENTS_EXCHANGE", "").strip()
            or "fetcher.job.events",
            cloudevents_source=env.get("STREAMING_CLOUDEVENTS_SOURCE", "").strip()
            or "//lerian.fetcher/worker",
            workers=_int(env, "RABBITMQ_NUMBERS_OF_WORKERS", 5),
        )


@dataclass(frozen=True, slots=True)
class StorageSettings:
    endpoint: str | None
    bucket: str | None
    region: str
    key_prefix: str
    access_key_id: str | None = field(repr=False)
    secret_key: str | None = field(repr=False)
    path_style: bool

    @property
    def uses_s3(self) -> bool:
        return bool(self.bucket)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StorageSettings:
        endpoint = env.get("OBJECT_STORAGE_ENDPOINT", "").strip() or None
        bucket = env.get("OBJECT_STORAGE_BUCKET", "").strip() or None
        if endpoint and not bucket:
            raise SettingsError(
                "OBJECT_STORAGE_BUCKET is required when OBJECT_STORAGE_ENDPOINT is set"
            )
        access = env.get("OBJECT_STORAGE_ACCESS_KEY_ID", "").strip() or None
        secret = env.get("OBJECT_STORAGE_SECRET_KEY", "").strip() or None
        if bool(access) != bool(secret):
            raise SettingsError(
                "OBJECT_STORAGE_ACCESS_KEY_ID and OBJECT_STORAGE_SECRET_KEY must be set together"
            )
        return cls(
            endpoint=endpoint,
            bucket=bucket,
            region=env.get("OBJECT_STORAGE_REGION", "").strip() or "us-east-1",
            key_prefix=env.get("OBJECT_STORAGE_KEY_PREFIX", "").strip(),
            access_key_id=access,
            secret_key=secret,
            path_style=_bool(env, "OBJECT_STORAGE_USE_PATH_STYLE", default=bool(endpoint)),
        )


@dataclass(frozen=True, slots=True)
class EngineSettings:
    max_result_bytes: int
    timeout_seconds: float
    parallelism: int
    pending_timeout_seconds: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> EngineSettings:
        raw = env.get("ENGINE_MAX_RESULT_BYTES", "").strip()
        max_bytes = 256 * 1024 * 1024
        if raw:
            try:
                value = int(raw)
            except ValueError:
                raise SettingsError(
                    f"ENGINE_MAX_RESULT_BYTES must be an integer, got {raw!r}"
                ) from None
            if value > 0:
                max_bytes = value
        return cls(
            max_result_bytes=max_bytes,
            timeout_seconds=float(_int(env, "ENGINE_TIMEOUT_SECONDS", 300)),
            parallelism=4,
            pending_timeout_seconds=_int(env, "FETCHER_PENDING_TIMEOUT_SECONDS", 3600),
        )


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    database_url: str | None = field(repr=False)
    http: HttpSettings
    keys: KeySettings
    broker: BrokerSettings
    storage: StorageSettings
    engine: EngineSettings
    version: str
    connections: ConnectionSettings = field(default_factory=ConnectionSettings)

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "fetcher.sqlite3"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        database_url = env.get("FETCHER_DATABASE_URL", "").strip() or None
        if database_url and not database_url.startswith(
            ("postgresql://", "postgres://", "sqlite:///", "memory://")
        ):
            raise SettingsError("FETCHER_DATABASE_URL must be a postgresql:// or sqlite:/// URL")
        return cls(
            data_dir=Path(env.get("FETCHER_DATA_DIR", "").strip() or "./var").resolve(),
            database_url=database_url,
            http=HttpSettings.from_env(env),
            keys=KeySettings.from_env(env),
            broker=BrokerSettings.from_env(env),
            storage=StorageSettings.from_env(env),
            engine=EngineSettings.from_env(env),
            version=env.get("VERSION", "").strip() or "0.0.0",
            connections=_connection_settings(env),
        )


def _connection_settings(env: Mapping[str, str]) -> ConnectionSettings:
    try:
        return ConnectionSettings.from_env(env, ssrf_guard=_bool(env, "FETCHER_SSRF_GUARD"))
    except ConnectionSettingsError as error:
        raise SettingsError(str(error)) from None
