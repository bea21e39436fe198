"""An outage of one dependency as a claim sees it: when it began, how often it was retried,
one log line when it begins and one when it ends."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Outage:
    dependency: str
    window: float
    """Seconds from the first failure after which the outage is given up on."""
    tries: int = 0
    _since: float = field(default_factory=time.monotonic)

    def over(self) -> bool:
        """Whether the window has passed (said once, in a log line)."""
        if time.monotonic() - self._since < self.window:
            return False
        log.warning(
            "dependency.outage.gave_up",
            extra={"dependency": self.dependency, "window_seconds": self.window},
        )
        return True

    def note(self, error: str) -> None:
        self.tries += 1
        if self.tries == 1:
            log.warning(
                "dependency.unavailable", extra={"dependency": self.dependency, "error": error}
            )

    def ended(self) -> None:
        seconds = round(time.monotonic() - self._since, 1)
        log.info("dependency.available", extra={"dependency": self.dependency, "after_s": seconds})
