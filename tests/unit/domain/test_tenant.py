"""The tenant value object, the tenancy rules of a request, and the tenant in the job's
events and dedup slots."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from uuid import UUID, uuid5

import pytest

from domain import dedup
from domain.errors import FetcherError
from domain.job import JobRequested, fold, request_job
from domain.request import ExtractionRequest
from domain.tenant import SINGLE_TENANCY, SINGLE_TENANT, Tenancy, Tenant, is_valid_tenant_id

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
A, B = Tenant("tenant-a"), Tenant("tenant-b")


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("tenant-a", True),
        ("Tenant_01", True),
        ("9" * 64, True),
        ("9" * 65, False),
        ("", False),
        ("-leading", False),
        ("_leading", False),
        ("has space", False),
        ("a/b", False),
        ("a.b", False),
        ("..", False),
        ("tenant:a", False),
        ("é", False),
        ("single-tenant", False),
    ],
)
def test_tenant_ids_are_short_plain_names(value, valid):
    assert is_valid_tenant_id(value) is valid
    if valid:
        assert Tenant(value).id == value
    elif value:
        with pytest.raises(ValueError):
            Tenant(value)


def test_the_single_tenant_has_no_id_and_reads_as_the_reference_names_it():
    assert SINGLE_TENANT.is_single and SINGLE_TENANT.id == ""
    assert SINGLE_TENANT.label == "single-tenant" and SINGLE_TENANT.key_prefix == ""
    assert not A.is_single and A.label == "tenant-a" and A.key_prefix == "tenant-a/"


def _code(call) -> str:
    with pytest.raises(FetcherError) as caught:
        call()
    return caught.value.code


def test_single_tenant_mode_ignores_the_claim():
    assert SINGLE_TENANCY.tenant_of("tenant-a") == SINGLE_TENANT
    assert SINGLE_TENANCY.tenant_of(None) == SINGLE_TENANT
    assert not SINGLE_TENANCY.serves("tenant-a")


@pytest.mark.parametrize("claim", [None, "", 42, ["tenant-a"]])
def test_multi_tenant_mode_requires_a_tenant_claim(claim):
    assert _code(lambda: Tenancy.multi().tenant_of(claim)) == "FET-1080"


@pytest.mark.parametrize("claim", ["bad tenant", "a/b", "x" * 65, "single-tenant"])
def test_multi_tenant_mode_refuses_a_claim_that_is_no_tenant_id(claim):
    with pytest.raises(FetcherError) as caught:
        Tenancy.multi().tenant_of(claim)
    assert caught.value.code == "FET-1080" and caught.value.kind.value == "invalid"
    assert claim not in caught.value.message


def test_multi_tenant_mode_serves_the_claimed_tenant_within_the_allow_list():
    assert Tenancy.multi().tenant_of("tenant-a") == A
    allowed = Tenancy.multi(["tenant-a"])
    assert allowed.tenant_of("tenant-a") == A
    with pytest.raises(FetcherError) as caught:
        allowed.tenant_of("tenant-b")
    assert (caught.value.code, caught.value.kind.value) == ("FET-1081", "not_found")
    assert allowed.serves("tenant-a") and not allowed.serves("tenant-b")
    assert not allowed.serves("bad tenant") and Tenancy.multi().serves("tenant-b")


def test_dedup_slots_are_per_tenant_and_unchanged_for_the_single_tenant():
    digest = "ab" * 32
    assert dedup.slot_id(digest, tenant=SINGLE_TENANT) == uuid5(dedup.SLOT_NAMESPACE, digest)
    assert dedup.slot_id(digest, SINGLE_TENANT) == dedup.slot_id(digest, tenant=SINGLE_TENANT)
    assert (
        len(
            {
                dedup.slot_id(digest, tenant=SINGLE_TENANT),
                dedup.slot_id(digest, A),
                dedup.slot_id(digest, B),
            }
        )
        == 3
    )


def _request() -> ExtractionRequest:
    return ExtractionRequest.create({"pg": {"t": ["id"]}}, None, {"source": "payments"})


def test_a_requested_job_records_its_tenant():
    job_id = UUID(int=1)
    event = request_job(job_id, _request(), NOW, B)
    assert event.tenant == "tenant-b"
    job = fold([event])
    assert job is not None and job.tenant == B
    single = fold([request_job(job_id, _request(), NOW, tenant=SINGLE_TENANT)])
    assert single is not None and single.tenant == SINGLE_TENANT


def test_a_requested_event_recorded_before_tenants_reads_as_the_single_tenant():
    state = {"request": _request().to_dict(), "request_hash": "ab" * 32}
    JobRequested.upcast_v1_v2(state)
    assert state["tenant"] == ""
    assert JobRequested.class_version >= 2


def test_tenants_and_tenancies_are_values_that_cannot_change():
    """A tenant keys caches, rate limits and slots: it must hash by value and stay as built."""
    assert {Tenant("a"): 1}[Tenant("a")] == 1
    assert hash(Tenancy.multi(["a"])) == hash(Tenancy.multi(["a"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        Tenant("a").id = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Tenancy.multi().multi_tenant = False  # type: ignore[misc]
