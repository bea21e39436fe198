"""The connection commands under the module name older imports use; each lives in its own
module (``register_connection``, ``update_connection``, ``remove_connection``,
``check_connection``, ``assign_connection``)."""

from __future__ import annotations

from application.commands.connection_input import ConnectionInput, ConnectionPatch, SslInput
from application.commands.register_connection import RegisterConnection
from application.commands.remove_connection import RemoveConnection

__all__ = [
    "ConnectionInput",
    "ConnectionPatch",
    "RegisterConnection",
    "RemoveConnection",
    "SslInput",
]
