"""The composition package: the one place that builds adapters and use cases.

- ``infrastructure``: adapters opened from the settings, as typed bundles (``bundles``).
- ``api``, ``worker``, ``relay``: each role wired on that infrastructure.
- ``readiness``: what each role is checked on, before it starts and once it runs.
- ``security``: how the HTTP API authenticates and authorises.
- ``bootstrap``: all of it for the roles of one process; tests swap adapters with
  ``Overrides``.
"""

from entrypoints.composition.bootstrap import bootstrap
from entrypoints.composition.overrides import NO_OVERRIDES, Overrides

__all__ = ["NO_OVERRIDES", "Overrides", "bootstrap"]
