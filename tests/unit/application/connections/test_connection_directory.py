"""The connection directory: internal datasources have stable ids."""

from __future__ import annotations

from uuid import UUID

from application.connections.directory import internal_id


def test_internal_ids_are_uuid5_over_tenant_and_name():
    assert internal_id("midaz_onboarding") == UUID("d23dda0c-5f1a-5d94-a584-ea056a9fa8c1")
    assert internal_id("midaz_onboarding", "t1") != internal_id("midaz_onboarding")
