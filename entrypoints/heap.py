"""The garbage collector's view of a started process.

A role starts by importing its libraries and building its application, clients and pools:
some 150-250 k objects that live as long as the process. CPython's full collection walks every
tracked object, which here takes 100-200 ms, a stall of every request and job in flight that
comes back whenever enough objects have survived since the last one. Once the role has started,
those objects are moved out of the collector's view (``gc.freeze``): later collections walk
only what requests and jobs allocate. The frozen objects are still freed by reference counting;
only a reference cycle among them would stay (start-up builds none that later dies).
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collects once, then freezes what survived; how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
