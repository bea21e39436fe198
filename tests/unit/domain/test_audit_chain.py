"""The audit chain's own rules, each at its edge: which records are job events, how a linked
state is told from one recorded before chaining, what ``link`` accepts and writes, and how a
checkpoint keeps the heads digest it was given."""

from __future__ import annotations

import dataclasses
import json

import pytest

from domain.audit_chain import (
    ChainError,
    Checkpoint,
    Record,
    content_digest,
    heads_digest,
    heads_root,
    link,
    prev_digest_of,
    split_linked,
)

JOB = "0190f0f0-0000-7000-8000-00000000000a"
HEADS = {JOB: (2, "ab" * 32)}


def test_only_job_topics_are_job_events():
    assert Record(1, JOB, 1, "domain.job:JobRequested", b"{}").is_job_event is True
    assert Record(2, JOB, 1, "domain.dedup:RequestSlotTaken", b"{}").is_job_event is False


def test_records_and_checkpoints_are_values_that_cannot_change():
    record = Record(1, JOB, 1, "domain.job:JobRequested", b"{}")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.state = b"{}"  # type: ignore[misc]
    checkpoint = Checkpoint(1, 1, "00" * 32, "2026-12-05T10:00:00Z", "1.k", HEADS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        checkpoint.root = "11" * 32  # type: ignore[misc]


@pytest.mark.parametrize("filler", [b"x", b" "], ids=["after-the-key", "before-the-key"])
def test_a_state_recorded_before_chaining_is_never_taken_for_a_linked_one(filler):
    """Its bytes where a linked state's digest key would be sort after, or before, that key."""
    state = b'{"note":"' + filler * 90 + b'"}'
    assert split_linked(state) == (state, None)
    assert prev_digest_of(state) is None


def test_a_linked_state_splits_into_its_body_and_digest():
    state, digest = link(JOB, 1, "domain.job:JobRequested", b'{"a":1}', "")
    body, carried = split_linked(state)
    assert carried == digest
    assert body == b'{"a":1,"prev_digest":""}'
    assert prev_digest_of(body) == ""
    linked, _ = link(JOB, 2, "domain.job:JobClaimed", b'{"b":2}', digest)
    assert prev_digest_of(split_linked(linked)[0]) == digest


def test_link_writes_the_two_keys_last_even_into_an_empty_object():
    state, digest = link(JOB, 1, "domain.job:JobRequested", b"{}", "")
    assert state == b'{"prev_digest":"","digest":"' + digest.encode() + b'"}'
    assert digest == content_digest(JOB, 1, "domain.job:JobRequested", b'{"prev_digest":""}')


@pytest.mark.parametrize("state", [b'{"a":1', b'"a":1}', b"[1]"])
def test_link_refuses_what_is_not_a_json_object(state):
    with pytest.raises(ChainError, match="not a JSON object"):
        link(JOB, 1, "domain.job:JobRequested", state, "")


def test_a_checkpoint_keeps_the_heads_digest_it_was_given():
    given = Checkpoint(1, 1, "00" * 32, "t", "1.k", HEADS, heads_sha256="00" * 32)
    assert given.heads_sha256 == "00" * 32 and given.heads_match is False
    computed = Checkpoint(1, 1, "00" * 32, "t", "1.k", HEADS)
    assert computed.heads_sha256 == heads_digest(HEADS) and computed.heads_match is True
    hidden = Checkpoint(1, 1, "00" * 32, "t", "1.k", None, heads_sha256="cd" * 32)
    assert hidden.heads_match is True and hidden.heads_json() is None
    assert "heads" not in hidden.to_json() and "heads" not in computed.to_json(with_heads=False)
    assert computed.to_json()["heads"] == {JOB: [2, "ab" * 32]}


def test_a_checkpoint_read_back_is_the_one_written():
    written = Checkpoint(7, 9, "00" * 32, "t", "1.k", HEADS, signature="c2ln")
    assert Checkpoint.from_json(json.loads(json.dumps(written.to_json()))) == written
    bare = Checkpoint.from_json({**written.to_json(with_heads=False), "heads": None})
    assert bare.heads is None and bare.signature == "c2ln"
    assert Checkpoint.from_json({**written.to_json(), "signature": None}).signature == ""


def test_a_state_is_linked_only_when_it_ends_right_after_its_digest():
    tail = b',"digest":"' + b"a" * 64
    for ending in (b'"!', b'"~'):  # sorting before and after the closing quote and brace
        state = b'{"note":1' + tail + ending
        assert split_linked(state) == (state, None)


def test_a_near_miss_of_the_prev_digest_key_links_to_nothing():
    """Only the exact key counts: one letter off either way (sorting before or after it) is
    not a link, even when the 64 characters before the end are the predecessor's digest."""
    digest = b"ab" * 32
    for key in (b'"prev_digesT":"', b'"prev_digesu":"'):
        assert prev_digest_of(b'{"n":1,' + key + digest + b'"}') is None
    assert prev_digest_of(b'{"n":1,"prev_digest":"' + digest + b'"}') == digest.decode()


def test_a_state_naming_prev_digest_as_a_value_is_not_taken_for_a_chained_one():
    state, digest = link(JOB, 1, "domain.job:JobRequested", b'{"note":"prev_digest"}', "")
    assert split_linked(state)[1] == digest
    with pytest.raises(ChainError):  # but a state already carrying the key is refused
        link(JOB, 2, "domain.job:JobClaimed", state, digest)


def test_heads_match_only_their_own_digest_whichever_way_another_sorts():
    for given in ("00" * 32, "ff" * 32):
        assert (
            Checkpoint(1, 1, "00" * 32, "t", "1.k", HEADS, heads_sha256=given).heads_match is False
        )


def test_a_prev_digest_counts_only_where_the_state_closes_right_after_it():
    digest = b"ab" * 32
    for ending in (b'"!', b'"~'):  # sorting before and after the closing quote and brace
        assert prev_digest_of(b'{"n":1,"prev_digest":"' + digest + ending) is None


def test_heads_whose_root_is_not_the_signed_one_do_not_match():
    for other in ("00" * 32, "ff" * 32):  # sorting before and after the heads' own root
        signed = Checkpoint(1, 1, "00" * 32, "t", "1.k", HEADS, heads_root=other)
        assert signed.heads_sha256 == heads_digest(HEADS) and signed.heads_match is False
    rooted = Checkpoint(1, 1, "00" * 32, "t", "1.k", HEADS, heads_root=heads_root(HEADS))
    assert rooted.heads_match is True
