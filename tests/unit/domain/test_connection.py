"""The stored connection: only internal datasources carry plaintext credentials."""

from __future__ import annotations

from dataclasses import replace

import pytest

from domain.connection import InternalCredentials
from tests.support.connection_kit import internal_connection


def test_only_internal_datasources_carry_plaintext_credentials():
    with pytest.raises(ValueError, match="internal"):
        replace(
            internal_connection("ledger"),
            internal=False,
            internal_credentials=InternalCredentials(),
        )
