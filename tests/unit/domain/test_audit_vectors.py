"""Known-answer vectors of the audit trail (``docs/reference/audit-vectors.json``): three stored
records of two jobs, their digests, links and running log hash, and one signed checkpoint over
them. The file is what an outside implementation checks itself against; here it is

- rebuilt from the product's functions (the file must not drift from them),
- recomputed with ``hashlib`` and ``cryptography`` alone, from the formulas the auditor guide
  states (so the product's functions cannot drift from the formulas either),
- verified by ``ChainVerifier``, and broken by changing any single input.

Regenerate after a deliberate format change: ``python -m tests.unit.domain.test_audit_vectors``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from adapters.crypto.audit_signing import Ed25519CheckpointKeys, Ed25519CheckpointSigner
from application.audit.verify import ChainVerifier
from domain.audit_chain import (
    GENESIS,
    ZERO_ROOT,
    Checkpoint,
    Record,
    heads_leaves,
    heads_root,
    inclusion_path,
    link,
    log_step,
)

VECTORS = Path(__file__).resolve().parents[3] / "docs" / "reference" / "audit-vectors.json"
SEED = bytes(range(32))
"""The Ed25519 private key of the vectors (never a real key)."""

JOB_A = "0190f0f0-0000-7000-8000-00000000000a"
JOB_B = "0190f0f0-0000-7000-8000-00000000000b"
INPUTS = [
    (1, JOB_A, 1, "domain.job:JobRequested",
     b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-05T10:00:00+00:00"},'
     b'"request":{"source":"payments"}'),
    (2, JOB_B, 1, "domain.job:JobRequested",
     b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-05T10:00:01+00:00"},'
     b'"request":{"source":"r\xc3\xa9sum\xc3\xa9 \\"q\\""}'),
    (3, JOB_A, 2, "domain.job:JobClaimed",
     b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-05T10:00:02+00:00"},'
     b'"worker_id":"w1"'),
]  # fmt: skip
"""(position, job, version, topic, the recorder's state without its closing brace)."""
RECORDED_AT = "2026-12-05T10:00:03+00:00"


def build() -> dict[str, Any]:
    """The vectors, from the product's own functions."""
    signer = Ed25519CheckpointSigner(Ed25519PrivateKey.from_private_bytes(SEED), "1")
    heads: dict[str, tuple[int, str]] = {}
    root = bytes.fromhex(ZERO_ROOT)
    records = []
    for position, job, version, topic, opened in INPUTS:
        prev = heads[job][1] if job in heads else GENESIS
        state, digest = link(job, version, topic, opened + b"}", prev)
        record = Record(position, job, version, topic, state)
        root = log_step(root, record)
        heads[job] = (version, digest)
        records.append(
            {
                "position": position,
                "originator_id": job,
                "version": version,
                "topic": topic,
                "state": state.decode(),
                "prev_digest": prev,
                "digest": digest,
                "root_after": root.hex(),
            }
        )
    unsigned = Checkpoint(
        position=3, count=3, root=root.hex(), recorded_at=RECORDED_AT, key_id=signer.key_id,
        heads=heads, heads_root=heads_root(heads),
    )  # fmt: skip
    checkpoint = {
        **unsigned.to_json(),
        "signature": signer.sign(unsigned.message()),
        "message": unsigned.message().decode(),
    }
    leaves = [leaf for _, leaf in heads_leaves(heads)]
    inclusion = {
        "job": JOB_B,
        "leaf": leaves[1].hex(),
        "index": 1,
        "size": len(leaves),
        "path": [node.hex() for node in inclusion_path(leaves, 1)],
    }
    public = base64.b64encode(signer.public_key.public_bytes_raw()).decode()
    return {
        "about": "Fetcher audit trail known-answer vectors; formulas in docs/guides/auditors.md",
        "private_key_seed_hex": SEED.hex(),
        "public_key_base64": public,
        "records": records,
        "checkpoint": checkpoint,
        "inclusion": inclusion,
    }


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(VECTORS.read_text())
    return loaded


def test_the_file_is_what_the_product_computes(vectors: dict[str, Any]) -> None:
    assert vectors == build()


def _sha256(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()


def test_an_outside_implementation_reproduces_every_value(vectors: dict[str, Any]) -> None:
    """The formulas, written out with hashlib and cryptography only."""
    root = bytes(32)
    heads: dict[str, list[Any]] = {}
    for r in vectors["records"]:
        state = r["state"].encode()
        # The stored state ends with "prev_digest":"<hex or empty>","digest":"<hex>"}.
        tail = f',"digest":"{r["digest"]}"}}'.encode()
        assert state.endswith(tail)
        body = state[: -len(tail)] + b"}"
        assert body.endswith(f'"prev_digest":"{r["prev_digest"]}"}}'.encode())
        expected_prev = heads[r["originator_id"]][1] if r["originator_id"] in heads else ""
        assert r["prev_digest"] == expected_prev
        header = f"{r['originator_id']}\n{r['version']}\n{r['topic']}\n".encode()
        assert _sha256(b"fetcher-audit-event-v1\n", header, body) == r["digest"]
        line = (
            f"{r['position']}\x1f{r['originator_id']}\x1f{r['version']}\x1f{r['topic']}"
            f"\x1f{len(state)}\n"
        ).encode()
        root = hashlib.sha256(root + line + state).digest()
        assert root.hex() == r["root_after"]
        heads[r["originator_id"]] = [r["version"], r["digest"]]

    c = vectors["checkpoint"]
    assert c["heads"] == heads
    canonical = json.dumps(heads, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert hashlib.sha256(canonical.encode()).hexdigest() == c["heads_sha256"]
    # The heads' Merkle root (RFC 9162): leaves in job id order, 0x00 before a leaf's JSON,
    # 0x01 before two children.
    leaves = [
        hashlib.sha256(
            b"\x00" + json.dumps([job, *heads[job]], separators=(",", ":")).encode()
        ).digest()
        for job in sorted(heads)
    ]
    assert len(leaves) == 2
    assert hashlib.sha256(b"\x01" + leaves[0] + leaves[1]).hexdigest() == c["heads_root"]
    proof = vectors["inclusion"]
    assert proof["leaf"] == leaves[proof["index"]].hex() and proof["path"] == [leaves[0].hex()]
    body = {k: c[k] for k in ("position", "count", "root", "recorded_at", "key_id",
                              "heads_sha256", "heads_root")}  # fmt: skip
    message = (
        b"fetcher-audit-checkpoint-v1\n"
        + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    assert message.decode() == c["message"]
    assert (c["count"], c["root"]) == (len(vectors["records"]), root.hex())
    public_raw = base64.b64decode(vectors["public_key_base64"])
    assert (
        Ed25519PrivateKey.from_private_bytes(bytes.fromhex(vectors["private_key_seed_hex"]))
        .public_key()
        .public_bytes_raw()
        == public_raw
    )
    assert c["key_id"] == "1." + hashlib.sha256(public_raw).hexdigest()[:16]
    Ed25519PublicKey.from_public_bytes(public_raw).verify(base64.b64decode(c["signature"]), message)


def _verifier_report(vectors: dict[str, Any]) -> Any:
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(vectors["public_key_base64"]))
    c = vectors["checkpoint"]
    checkpoint = Checkpoint.from_json(c)
    verifier = ChainVerifier(Ed25519CheckpointKeys([(c["key_id"], public)]), [checkpoint])
    for r in vectors["records"]:
        verifier.feed(
            Record(r["position"], r["originator_id"], r["version"], r["topic"], r["state"].encode())
        )
    return verifier.finish()


def test_the_verifier_accepts_the_vectors(vectors: dict[str, Any]) -> None:
    report = _verifier_report(vectors)
    assert report.ok, report.summary()
    assert (report.records, report.jobs, report.covered_to) == (3, 2, 3)


@pytest.mark.parametrize(
    ("index", "field", "value"),
    [
        (0, "topic", "domain.job:JobFailed"),
        (1, "version", 2),
        (1, "originator_id", JOB_A.replace("a", "c")),
        (2, "state", None),
    ],
    ids=["topic", "version", "job", "state"],
)
def test_changing_any_input_breaks_the_verification(
    vectors: dict[str, Any], index: int, field: str, value: Any
) -> None:
    changed = json.loads(json.dumps(vectors))
    record = changed["records"][index]
    record[field] = value if value is not None else record["state"].replace('"w1"', '"w2"')
    assert not _verifier_report(changed).ok


if __name__ == "__main__":
    VECTORS.write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.write(f"wrote {VECTORS}\n")
