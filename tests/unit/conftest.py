"""Fixtures of every unit test: ``app``, the service wired by ``bootstrap`` on the in-memory
twins, and ``client``, its HTTP API."""

from tests.support.http import client
from tests.support.twins import app

__all__ = ["app", "client"]
