"""The heads' Merkle tree (RFC 9162, 2.1): every leaf of every tree size proves its place, and
nothing else does."""

from __future__ import annotations

import hashlib

from domain.audit_chain import (
    head_leaf,
    heads_leaves,
    heads_root,
    inclusion_path,
    merkle_root,
    root_from_path,
)


def _leaves(n: int) -> list[bytes]:
    return [head_leaf(f"job-{i:03}", i + 1, f"{i:064x}") for i in range(n)]


def test_the_root_follows_the_rfc_definition() -> None:
    def node(left: bytes, right: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + left + right).digest()

    a, b, c = _leaves(3)
    assert merkle_root([]) == hashlib.sha256(b"").digest()
    assert merkle_root([a]) == a
    assert merkle_root([a, b]) == node(a, b)
    assert merkle_root([a, b, c]) == node(node(a, b), c)  # split at the largest power of 2 < n
    assert head_leaf("j", 1, "d") == hashlib.sha256(b'\x00["j",1,"d"]').digest()


def test_every_leaf_of_every_size_proves_its_place_and_only_there() -> None:
    for size in range(1, 18):
        leaves = _leaves(size)
        root = merkle_root(leaves)
        for index, leaf in enumerate(leaves):
            path = inclusion_path(leaves, index)
            assert root_from_path(leaf, index, size, path) == root, (size, index)
            if size > 1:
                assert root_from_path(leaf, (index + 1) % size, size, path) != root
                other = head_leaf("job-999", 1, "0" * 64)
                assert root_from_path(other, index, size, path) != root
                assert root_from_path(leaf, index, size, path[:-1]) != root


def test_an_index_outside_the_tree_proves_nothing() -> None:
    leaves = _leaves(4)
    for index in (4, 5, 7, -1):
        assert root_from_path(leaves[0], index, 4, inclusion_path(leaves, 0)) is None, index


def test_a_path_longer_than_the_tree_is_deep_proves_nothing() -> None:
    for size in (1, 2, 3, 5, 8):
        leaves = _leaves(size)
        for index, leaf in enumerate(leaves):
            path = inclusion_path(leaves, index)
            assert root_from_path(leaf, index, size, [*path, b"\x07" * 32]) is None


def test_the_heads_are_ordered_by_job_id() -> None:
    heads = {"b": (2, "x" * 64), "a": (1, "y" * 64)}
    assert [job for job, _ in heads_leaves(heads)] == ["a", "b"]
    assert (
        heads_root(heads)
        == merkle_root([head_leaf("a", 1, "y" * 64), head_leaf("b", 2, "x" * 64)]).hex()
    )


def test_a_leaf_is_the_canonical_json_whatever_the_job_id_holds() -> None:
    import json

    for job in ["0190f0f0-0000-7000-8000-00000000000a", 'a"b', "back\\slash", "tab\there", "é"]:
        canonical = json.dumps(
            [job, 3, "ab" * 32], sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
        assert head_leaf(job, 3, "ab" * 32) == hashlib.sha256(b"\x00" + canonical).digest(), job
