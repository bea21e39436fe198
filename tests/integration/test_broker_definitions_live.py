"""The shipped broker definitions on a real RabbitMQ: written out for a scratch virtual host
(`fetcher broker definitions --vhost`; the shipped file but for the vhost, as tests/deploy
pins), imported, then used by Fetcher as the operator's guide says, with a user holding only
the permissions of deploy/compose/rabbitmq-users.json. Fetcher's own declaration of the
topology must agree with the file (no PRECONDITION_FAILED), and work orders, events and
dead-lettering must pass.

Needs `rabbitmqctl` for the broker on this machine (as the machines of this project have).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import aio_pika
import pytest

from adapters.messaging.rabbitmq_topology import RabbitTopology
from tests.integration.conftest import require_listening

ROOT = Path(__file__).resolve().parents[2]
USERS = ROOT / "deploy" / "compose" / "rabbitmq-users.json"
CTL = shutil.which("rabbitmqctl")

pytestmark = pytest.mark.skipif(
    CTL is None, reason="rabbitmqctl is not installed: the broker cannot be administered here"
)


def ctl(*args: str) -> str:
    result = subprocess.run(
        [str(CTL), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"rabbitmqctl {' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.fixture
def scratch():
    """A virtual host loaded from definitions.json and a user with the documented permissions."""
    require_listening("amqp://127.0.0.1:5672", "RabbitMQ")
    name = f"fetcher-defs-{uuid.uuid4().hex[:8]}"
    password = secrets.token_urlsafe(16)
    # What the operator's guide says for a vhost other than "/": the definitions written
    # out for it (`fetcher broker definitions --vhost NAME`).
    definitions = RabbitTopology().definitions(name)
    (permissions,) = json.loads(USERS.read_text())["permissions"]
    ctl("add_vhost", name)
    try:
        ctl("add_user", name, password)
        ctl(
            "set_permissions",
            "-p",
            name,
            name,
            permissions["configure"],
            permissions["write"],
            permissions["read"],
        )
        # rabbitmqctl reads the file as the broker's user: a readable file in the system's
        # temporary folder (pytest's own are private to this user)
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir="/tmp") as file:
            file.write(json.dumps(definitions))
            file.flush()
            os.chmod(file.name, 0o644)
            ctl("import_definitions", file.name)
        deadline = time.monotonic() + 30
        while ctl("list_queues", "-q", "-p", name, "name").count("fetcher.") < 4:
            assert time.monotonic() < deadline, "the definitions were not imported"
            time.sleep(0.5)
        yield f"amqp://{name}:{password}@127.0.0.1:5672/{name}"
    finally:
        subprocess.run([str(CTL), "delete_vhost", name], capture_output=True, timeout=60)
        subprocess.run([str(CTL), "delete_user", name], capture_output=True, timeout=60)


async def _exercise(url: str) -> dict[str, int]:
    topology = RabbitTopology()
    await topology.apply(url)  # what a role does at start with FETCHER_BROKER_DECLARE_TOPOLOGY=true
    await topology.apply(url, passive=True)  # the readiness check
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        await channel.default_exchange.publish(
            aio_pika.Message(b"order"), routing_key=topology.work_queue, mandatory=True
        )
        events = await channel.get_exchange(topology.events_exchange, ensure=False)
        for key in ("job.completed", "job.failed"):
            await events.publish(aio_pika.Message(b"event"), routing_key=key, mandatory=True)
        work = await channel.get_queue(topology.work_queue, ensure=False)
        message = await work.get(timeout=5)
        await message.reject(requeue=False)  # dead-lettered by the queue's arguments
        counts: dict[str, int] = {}
        deadline = time.monotonic() + 10
        names = (
            topology.dead_letter_queue,
            "fetcher.job.completed.queue",
            "fetcher.job.failed.queue",
        )
        while time.monotonic() < deadline:
            for name in names:
                declared = await channel.declare_queue(name, passive=True)
                counts[name] = declared.declaration_result.message_count or 0
            if all(counts.values()):
                break
            await asyncio.sleep(0.2)
        return counts
    finally:
        await connection.close()


def test_fetcher_works_on_a_broker_loaded_from_the_shipped_definitions(scratch: str):
    counts = asyncio.run(_exercise(scratch))
    assert counts == {
        "fetcher.dlq": 1,
        "fetcher.job.completed.queue": 1,
        "fetcher.job.failed.queue": 1,
    }
