"""What the HTTP layer and the runners get from the composition root."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from application.commands.manage_connections import RegisterConnection, RemoveConnection
from application.commands.request_job import RequestJob
from application.queries.connections import GetConnection, ListConnections
from application.queries.get_job import GetJob, GetJobHistory

Check = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class ApiServices:
    request_job: RequestJob
    get_job: GetJob
    get_job_history: GetJobHistory
    register_connection: RegisterConnection
    remove_connection: RemoveConnection
    get_connection: GetConnection
    list_connections: ListConnections
    checks: dict[str, Check] = field(default_factory=dict)
    version: str = "0.0.0"
    on_job_recorded: Callable[[], None] = lambda: None
