"""deploy/rabbitmq/definitions.json is the reference's broker topology (§6.4), the same one
Fetcher declares at start (RabbitTopology): same names, types, arguments and bindings, so a
broker loaded from the file and Fetcher never disagree."""

from __future__ import annotations

import json

from adapters.messaging.rabbitmq_topology import RabbitTopology
from adapters.messaging.wire.events import EVENTS_EXCHANGE
from adapters.messaging.wire.work import WORK_QUEUE
from tests.deploy.conftest import DEPLOY

DEFINITIONS = json.loads((DEPLOY / "rabbitmq" / "definitions.json").read_text())


def test_the_exchanges_are_the_references():
    exchanges = {e["name"]: e for e in DEFINITIONS["exchanges"]}
    assert {name: e["type"] for name, e in exchanges.items()} == {
        "fetcher.extract-external-data.exchange": "direct",
        "fetcher.dlx": "direct",
        "fetcher.job.events": "topic",
    }
    for exchange in exchanges.values():
        assert (exchange["durable"], exchange["auto_delete"], exchange["internal"]) == (
            True,
            False,
            False,
        )
        assert exchange["arguments"] == {}


def test_the_queues_and_their_arguments_are_the_references():
    queues = {q["name"]: q for q in DEFINITIONS["queues"]}
    assert {name: q["arguments"] for name, q in queues.items()} == {
        "fetcher.extract-external-data.queue": {
            "x-dead-letter-exchange": "fetcher.dlx",
            "x-dead-letter-routing-key": "fetcher.dlq.key",
        },
        "fetcher.dlq": {"x-message-ttl": 604_800_000, "x-max-length": 10_000},
        "fetcher.job.completed.queue": {},
        "fetcher.job.failed.queue": {},
    }
    assert all(q["durable"] and not q["auto_delete"] for q in queues.values())


def test_the_bindings_are_the_references():
    bindings = {
        (b["source"], b["destination"], b["destination_type"], b["routing_key"])
        for b in DEFINITIONS["bindings"]
    }
    assert bindings == {
        (
            "fetcher.extract-external-data.exchange",
            "fetcher.extract-external-data.queue",
            "queue",
            "fetcher.job.key",
        ),
        ("fetcher.dlx", "fetcher.dlq", "queue", "fetcher.dlq.key"),
        ("fetcher.job.events", "fetcher.job.completed.queue", "queue", "job.completed"),
        ("fetcher.job.events", "fetcher.job.failed.queue", "queue", "job.failed"),
    }
    assert {d["vhost"] for k in ("exchanges", "queues", "bindings") for d in DEFINITIONS[k]} == {
        "/"
    }


def test_fetcher_declares_exactly_what_the_file_defines():
    topology = RabbitTopology()
    assert (topology.work_queue, topology.events_exchange) == (WORK_QUEUE, EVENTS_EXCHANGE)
    queues = {q["name"]: q["arguments"] for q in DEFINITIONS["queues"]}
    assert queues[topology.work_queue] == topology.work_queue_arguments()
    assert queues[topology.dead_letter_queue] == topology.dead_letter_queue_arguments()
    exchanges = {e["name"] for e in DEFINITIONS["exchanges"]}
    assert {
        topology.work_exchange,
        topology.dead_letter_exchange,
        topology.events_exchange,
    } == exchanges
    routing = {(b["source"], b["destination"]): b["routing_key"] for b in DEFINITIONS["bindings"]}
    assert routing[(topology.work_exchange, topology.work_queue)] == topology.work_routing_key
    assert (
        routing[(topology.dead_letter_exchange, topology.dead_letter_queue)]
        == topology.dead_letter_routing_key
    )


def test_the_shipped_file_is_the_topology_written_out_for_vhost_root():
    assert RabbitTopology().definitions("/") == DEFINITIONS


def test_the_definitions_for_another_vhost_differ_only_in_the_vhost():
    other = RabbitTopology().definitions("fetcher-prod")

    assert other["vhosts"] == [{"name": "fetcher-prod"}]
    for kind in ("exchanges", "queues", "bindings"):
        assert {item["vhost"] for item in other[kind]} == {"fetcher-prod"}
        assert [{**item, "vhost": "/"} for item in other[kind]] == DEFINITIONS[kind]
