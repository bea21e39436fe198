"""After start-up, the garbage collector no longer walks what start-up built."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from entrypoints.heap import freeze_startup_heap


@pytest.fixture
def unfrozen_afterwards() -> Iterator[None]:
    yield
    gc.unfreeze()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.mark.usefixtures("unfrozen_afterwards")
def test_what_lived_before_is_frozen_and_what_comes_after_is_still_collected() -> None:
    before = _Node()
    frozen = freeze_startup_heap()

    assert frozen > 0
    assert not any(obj is before for obj in gc.get_objects())  # out of the collector's view

    # A reference cycle made after start-up is still found and freed.
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None
