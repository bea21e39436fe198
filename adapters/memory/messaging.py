"""In-memory publishers that record what was published, for tests and local wiring.

``fail_next(n)`` makes the next ``n`` publishes raise ``PublishFailed`` (nothing is recorded
for them), to exercise retry paths; ``unavailable`` makes ``check`` fail.
"""

from __future__ import annotations

from application.errors import PublishFailed
from application.ports.messaging import JobEventPublisher, JobNotification, WorkOrder, WorkQueue


class _FailureSwitch:
    def __init__(self) -> None:
        self.unavailable = False
        self.closed = False
        self.attempts = 0
        self._fail_next = 0

    def fail_next(self, count: int = 1) -> None:
        self._fail_next = count

    def _before_publish(self) -> None:
        self.attempts += 1
        if self.closed:
            raise PublishFailed("publisher is closed")
        if self._fail_next > 0:
            self._fail_next -= 1
            raise PublishFailed("simulated publish failure")

    async def check(self) -> None:
        if self.unavailable or self.closed:
            raise PublishFailed("simulated broker outage")

    async def close(self) -> None:
        self.closed = True


class RecordingWorkQueue(_FailureSwitch, WorkQueue):
    def __init__(self) -> None:
        super().__init__()
        self.published: list[WorkOrder] = []

    async def publish(self, order: WorkOrder) -> None:
        self._before_publish()
        self.published.append(order)


class RecordingJobEventPublisher(_FailureSwitch, JobEventPublisher):
    def __init__(self) -> None:
        super().__init__()
        self.published: list[JobNotification] = []

    async def publish(self, notification: JobNotification) -> None:
        self._before_publish()
        self.published.append(notification)

    @property
    def event_ids(self) -> list[str]:
        """The CloudEvents ids the real publisher would have sent, in order."""
        return [f"fetcher.job.{n.status}.{n.job_id}" for n in self.published]
