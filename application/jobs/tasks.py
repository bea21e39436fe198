from __future__ import annotations

import asyncio


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that made a task group fail (its siblings' cancellations are not it)."""
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return first_error(error)
        if not isinstance(error, asyncio.CancelledError):
            return error
    return group.exceptions[0]
