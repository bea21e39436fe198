"""``fetcher check`` against the real servers: everything ok, then each item failing with a
line that says what to do, never a secret, and the exit code that goes with it."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Iterator

import aio_pika
import pytest

from adapters.messaging.rabbitmq_topology import RabbitTopology
from adapters.storage.s3 import S3Settings
from entrypoints.cli.check import FAIL, OK, SKIP, Finding, run_checks
from entrypoints.cli.main import main
from tests.integration.auth_servers import LocalIdentityProvider
from tests.integration.conftest import PG_ADMIN_DSN, require_listening, unique_name

pytestmark = pytest.mark.integration

AMQP_URL = os.environ.get("FETCHER_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
MASTER_KEY = base64.b64encode(bytes(range(40, 72))).decode()
PG_PASSWORD = "pg-secret-not-shown"
S3_SECRET_WRONG = "s3-secret-not-shown"


@pytest.fixture
async def topology() -> AsyncIterator[RabbitTopology]:
    """The topology ``fetcher check`` expects for a work queue and events exchange of this
    test's own names (the dead-letter exchange and queue keep their default names, as no
    setting renames them), declared; the test's own queue and exchange deleted afterwards."""
    require_listening(AMQP_URL, "RabbitMQ")
    topology = RabbitTopology(
        work_queue=unique_name("check.work"),
        events_exchange=unique_name("check.events"),
        event_queues=(),
    )
    await topology.apply(AMQP_URL)
    yield topology
    connection = await aio_pika.connect(AMQP_URL)
    try:
        channel = await connection.channel()
        await channel.queue_delete(topology.work_queue)
        await channel.exchange_delete(topology.events_exchange)
    finally:
        await connection.close()


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIdentityProvider]:
    provider = LocalIdentityProvider().start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def env(
    topology: RabbitTopology, s3_settings: S3Settings, issuer: LocalIdentityProvider
) -> dict[str, str]:
    """The whole deployment's settings, all of them right."""
    require_listening(PG_ADMIN_DSN, "PostgreSQL")
    database = PG_ADMIN_DSN.replace("postgres@", f"postgres:{PG_PASSWORD}@", 1)
    assert s3_settings.endpoint_url and s3_settings.secret_access_key
    assert s3_settings.access_key_id
    return {
        "APP_ENC_KEY": MASTER_KEY,
        "FETCHER_DATABASE_URL": database,
        "RABBITMQ_URL": AMQP_URL,
        "RABBITMQ_FETCHER_WORK_QUEUE": topology.work_queue,
        "RABBITMQ_JOB_EVENTS_EXCHANGE": topology.events_exchange,
        "OBJECT_STORAGE_ENDPOINT": s3_settings.endpoint_url,
        "OBJECT_STORAGE_BUCKET": s3_settings.bucket,
        "OBJECT_STORAGE_ACCESS_KEY_ID": s3_settings.access_key_id,
        "OBJECT_STORAGE_SECRET_KEY": s3_settings.secret_access_key,
        "OBJECT_STORAGE_KEY_PREFIX": "check-test/",
        "FETCHER_AUTH_ISSUER": issuer.issuer,
        "FETCHER_AUTH_AUDIENCE": issuer.audience,
    }


def _by_item(findings: list[Finding]) -> dict[str, Finding]:
    return {finding.item: finding for finding in findings}


async def test_a_right_deployment_is_ok_on_every_item(env: dict[str, str]) -> None:
    findings = await run_checks(env, ("api", "worker", "relay"))

    assert [(f.item, f.status) for f in findings] == [
        ("settings", OK),
        ("key", OK),
        ("database", OK),
        ("broker", OK),
        ("topology", OK),
        ("storage", OK),
        ("witness", SKIP),
        ("auth", OK),
    ], [f.line() for f in findings]
    found = _by_item(findings)
    assert found["database"].detail.startswith("postgresql://")
    assert PG_PASSWORD not in found["database"].detail
    assert "1 signing key(s)" in found["auth"].detail


async def test_each_role_is_checked_for_what_it_needs(env: dict[str, str]) -> None:
    relay = [f.item for f in await run_checks(env, ("relay",))]
    api = [f.item for f in await run_checks(env, ("api",))]

    assert relay == ["settings", "key", "database", "broker", "topology", "witness"]
    assert api == ["settings", "key", "database", "broker", "topology", "auth"]


@pytest.mark.parametrize(
    ("change", "item", "says"),
    [
        ({"APP_ENC_KEY": ""}, "key", "APP_ENC_KEY is not set: generate one"),
        ({"APP_ENC_KEY": "c2hvcnQ="}, "key", "at least 32 bytes"),
        ({"FETCHER_DATABASE_URL": ""}, "database", "FETCHER_DATABASE_URL is not set"),
        (
            {"FETCHER_DATABASE_URL": f"postgresql://postgres:{PG_PASSWORD}@127.0.0.1:1/x"},
            "database",
            "postgresql://postgres@127.0.0.1:1/x: ",
        ),
        ({"RABBITMQ_URL": ""}, "broker", "RABBITMQ_URL is not set"),
        (
            {"RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/"},
            "broker",
            "amqp://guest@127.0.0.1:1/: ",
        ),
        (
            {"RABBITMQ_FETCHER_WORK_QUEUE": "fetcher.check.never.declared"},
            "topology",
            "'fetcher.check.never.declared' does not exist on vhost '/': "
            "set FETCHER_BROKER_DECLARE_TOPOLOGY=true, or load the definitions",
        ),
        (
            {"OBJECT_STORAGE_BUCKET": "fetcher-check-no-such-bucket"},
            "storage",
            "bucket 'fetcher-check-no-such-bucket' does not exist: create it or set "
            "OBJECT_STORAGE_BUCKET",
        ),
        (
            {"OBJECT_STORAGE_SECRET_KEY": S3_SECRET_WRONG},
            "storage",
            "refuses these credentials a write",
        ),
        (
            {"OBJECT_STORAGE_ENDPOINT": "http://127.0.0.1:1"},
            "storage",
            "cannot be reached",
        ),
        ({"OBJECT_STORAGE_BUCKET": "", "OBJECT_STORAGE_ENDPOINT": ""}, "storage", "not set"),
        (
            {"FETCHER_AUTH_ISSUER": "http://127.0.0.1:1/realms/none"},
            "auth",
            "check FETCHER_AUTH_ISSUER",
        ),
    ],
)
async def test_a_wrong_item_fails_with_what_to_do(
    env: dict[str, str], change: dict[str, str], item: str, says: str
) -> None:
    findings = await run_checks({**env, **change}, ("api", "worker", "relay"))

    found = _by_item(findings)
    assert found[item].status == FAIL
    assert says in found[item].detail
    others = [f for f in findings if f.item not in {item, "topology"} and f.status == FAIL]
    if item != "broker":
        assert not others, [f.line() for f in findings]
    text = "\n".join(f.line() for f in findings)
    for secret in (PG_PASSWORD, S3_SECRET_WRONG, env["OBJECT_STORAGE_SECRET_KEY"], MASTER_KEY):
        assert secret not in text


async def test_a_relay_without_a_bucket_is_told_its_checkpoints_have_no_witness(
    env: dict[str, str],
) -> None:
    without = {k: v for k, v in env.items() if not k.startswith("OBJECT_STORAGE_")}
    witness = _by_item(await run_checks(without, ("relay",)))["witness"]
    assert witness.status == SKIP and "FETCHER_AUDIT_WITNESS=false" in witness.detail
    off = _by_item(await run_checks({**env, "FETCHER_AUDIT_WITNESS": "false"}, ("relay",)))
    assert off["witness"].status == SKIP
    alone = _by_item(await run_checks(env, ("relay",)))["witness"]
    assert alone.status == OK and "takes a write" in alone.detail
    broken = {**env, "OBJECT_STORAGE_BUCKET": "fetcher-check-no-such-bucket"}
    assert _by_item(await run_checks(broken, ("relay",)))["witness"].status == FAIL


async def test_a_topology_declared_at_start_is_not_a_failure(env: dict[str, str]) -> None:
    findings = await run_checks(
        {
            **env,
            "RABBITMQ_FETCHER_WORK_QUEUE": "fetcher.check.never.declared",
            "FETCHER_BROKER_DECLARE_TOPOLOGY": "true",
        },
        ("relay",),
    )

    topology = _by_item(findings)["topology"]
    assert topology.status == OK
    assert "declared at start" in topology.detail


async def test_unreadable_settings_are_the_one_failure(env: dict[str, str]) -> None:
    findings = await run_checks({**env, "RABBITMQ_URL": "http://wrong"}, ("api",))

    assert [(f.item, f.status) for f in findings] == [("settings", FAIL)]
    assert "RABBITMQ_URL must be an amqp://" in findings[0].detail


def test_the_command_prints_one_line_per_item_and_exits_1_on_a_failure(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in {**env, "OBJECT_STORAGE_BUCKET": "fetcher-check-no-such-bucket"}.items():
        monkeypatch.setenv(name, value)

    assert main(["check", "--role", "worker"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["ok", "settings"],
        ["ok", "key"],
        ["ok", "database"],
        ["ok", "broker"],
        ["ok", "topology"],
        ["FAIL", "storage"],
    ]

    monkeypatch.setenv("OBJECT_STORAGE_BUCKET", env["OBJECT_STORAGE_BUCKET"])
    assert main(["check", "--role", "worker"]) == 0
    assert SKIP not in capsys.readouterr().out
