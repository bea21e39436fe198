from __future__ import annotations

from typing import Protocol


class HostGuard(Protocol):
    """SSRF protection for datasource hosts (reference §3.5), when the operator enables it.

    - ``check_literal`` is the cheap check done when a connection is written: it raises
      ``application.errors.ForbiddenHost`` (FET-0414) when ``host`` is an IP literal in a
      blocked range. Host names pass (they are checked when dialled). No DNS.
    - ``pin`` is the check done before every dial: blocked names (``localhost``, cloud metadata
      names, ``*.local``, ``*.internal``) and blocked IP literals raise ``ForbiddenHost``;
      other names are resolved and **every** address must be allowed. It returns the address
      the caller must dial, so nothing can re-resolve the name to another address between the
      check and the dial. A name that does not resolve raises
      ``application.errors.DatasourceUnavailable`` (nothing was checked, so nothing is dialled).
    - Messages never echo the host or the rule that matched.
    """

    def check_literal(self, host: str) -> None: ...

    async def pin(self, host: str, port: int) -> str: ...
