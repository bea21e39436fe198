"""The broker link of a process is logged once per change, whichever of its connections
noticed: lost when the first one drops, restored when the last one is back."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from adapters.messaging.rabbitmq import BrokerLink


class Callbacks(list[Any]):
    def add(self, callback: Any) -> None:
        self.append(callback)


class FakeConnection:
    """What ``BrokerLink`` uses of a robust connection: its two callback collections."""

    def __init__(self) -> None:
        self.close_callbacks = Callbacks()
        self.reconnect_callbacks = Callbacks()

    def drop(self, error: BaseException | None) -> None:
        for callback in self.close_callbacks:
            callback(self, error)

    def reconnect(self) -> None:
        for callback in self.reconnect_callbacks:
            callback(self)


def messages(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "adapters.messaging.rabbitmq"]


def test_two_connections_dropping_and_coming_back_are_two_lines(caplog):
    link = BrokerLink()
    publisher, consumer = FakeConnection(), FakeConnection()
    link.watch(publisher)  # type: ignore[arg-type]
    link.watch(consumer)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="adapters.messaging.rabbitmq"):
        publisher.drop(ConnectionResetError("reset by peer"))
        consumer.drop(ConnectionResetError("reset by peer"))
        consumer.drop(ConnectionRefusedError("refused"))  # a failed reconnection attempt
        publisher.reconnect()
        assert len(messages(caplog)) == 1
        consumer.reconnect()
    lines = messages(caplog)
    assert lines[0].startswith("message broker connection lost (ConnectionResetError")
    assert lines[1:] == ["message broker connection restored"]


def test_closing_a_connection_on_purpose_is_not_a_lost_link(caplog):
    link = BrokerLink()
    connection = FakeConnection()
    link.watch(connection)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="adapters.messaging.rabbitmq"):
        connection.drop(None)
        connection.drop(asyncio.CancelledError())
        link.closing(connection)  # type: ignore[arg-type]
        connection.drop(ConnectionResetError("closed by us"))
    assert messages(caplog) == []
