"""The audit chain's rules: canonical encoding, event digests, the log's running hash and the
body a checkpoint signs.

Stdlib only, so that an auditor can read (or re-implement) exactly what is checked.

- A job event's **digest** is SHA-256 over ``EVENT_DOMAIN``, ``"<job id>\n<version>\n<topic>\n"``
  and its stored state — the JSON object the event store's transcoder wrote, which holds the
  timestamp, the facts and ``prev_digest`` — without the ``,"digest":"…"`` key that ends it.
  The stored bytes are the canonical encoding: they are never re-encoded, and hashing them
  needs no JSON parser. The first event of a job links to ``GENESIS``; every later one to the
  digest of the version before it (for an event recorded before chaining, the digest of its
  stored state, computed the same way).
- The log's **running hash** starts at ``ZERO_ROOT`` and folds every record of the log, in
  position order, as ``root = SHA-256(root || header || stored state bytes)``.
- A **checkpoint** pins the running hash and count at a position, and the head (version,
  digest) of every job whose events fall after the previous checkpoint (by the SHA-256 of
  their canonical JSON); it is signed over ``CHECKPOINT_DOMAIN`` and its canonical JSON body.
- Since the heads' **Merkle root** was added, a checkpoint also signs ``heads_root``: the root of
  a Merkle tree (RFC 9162, section 2.1) whose leaves are the heads in job id order, each leaf
  ``SHA-256(0x00 || canonical JSON [job, version, digest])``, each node
  ``SHA-256(0x01 || left || right)``. A job's inclusion proof (its leaf's index, the tree's size
  and the sibling hashes up to the root) shows one tenant's job in a checkpoint without showing
  the other jobs. Checkpoints recorded before it have no ``heads_root`` (and sign no such key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EVENT_DOMAIN = b"fetcher-audit-event-v1\n"
CHECKPOINT_DOMAIN = b"fetcher-audit-checkpoint-v1\n"
GENESIS = ""
ZERO_ROOT = "0" * 64
JOB_TOPIC_PREFIX = "domain.job:"
"""Topics of the job's events (the chained ones); other records are covered by the log hash."""


class ChainError(ValueError):
    """A stored state that cannot be chained (not a JSON object, or already chained)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One record of the log as stored: position, originator, version, topic, state bytes."""

    position: int
    originator_id: str
    version: int
    topic: str
    state: bytes

    @property
    def is_job_event(self) -> bool:
        return self.topic.startswith(JOB_TOPIC_PREFIX)


def canonical_json(value: Any) -> bytes:
    """Keys sorted, no spaces, UTF-8, no NaN: the same bytes for the same value anywhere."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def parse_state(state: bytes) -> dict[str, Any]:
    value = json.loads(state)
    if not isinstance(value, dict):
        raise ChainError("a stored state is not a JSON object")
    return value


_DIGEST_KEY = b',"digest":"'
_PREV_KEY = b'"prev_digest":"'
_DIGEST_TAIL = len(_DIGEST_KEY) + 64 + 2


def split_linked(state: bytes) -> tuple[bytes, str | None]:
    """The stored state without its trailing ``digest`` key, and the digest it carries; for a
    state recorded before chaining, the state itself and None. (What is carried is not
    checked to be hex: anything else never equals a digest.)"""
    if (
        state[-_DIGEST_TAIL : -_DIGEST_TAIL + len(_DIGEST_KEY)] == _DIGEST_KEY
        and state[-2:] == b'"}'
    ):
        return state[:-_DIGEST_TAIL] + b"}", state[-66:-2].decode("ascii", "replace")
    return state, None


def prev_digest_of(body: bytes) -> str | None:
    """The ``prev_digest`` a linked state (without its digest) ends with, or None."""
    if body[-81:-66] == _PREV_KEY and body[-2:] == b'"}':
        return body[-66:-2].decode("ascii", "replace")
    if body.endswith(_PREV_KEY + b'"}'):
        return GENESIS
    return None


_EVENT_HASH = hashlib.sha256(EVENT_DOMAIN)


def content_digest(originator_id: str, version: int, topic: str, body: bytes) -> str:
    """SHA-256 over ``EVENT_DOMAIN``, the job id, version and topic, and the stored state
    without its ``digest`` key (``body``: timestamp, facts and ``prev_digest``)."""
    h = _EVENT_HASH.copy()
    h.update(f"{originator_id}\n{version}\n{topic}\n".encode() + body)
    return h.hexdigest()


def record_digest(record: Record) -> str:
    """The digest of a record's content, whether or not it carries one."""
    body, _ = split_linked(record.state)
    return content_digest(record.originator_id, record.version, record.topic, body)


def link(
    originator_id: str, version: int, topic: str, state: bytes, prev_digest: str
) -> tuple[bytes, str]:
    """``state`` (a stored JSON object) with ``prev_digest`` and its own ``digest`` added as
    its last two keys (the rest of the bytes kept as the recorder encoded them), and the
    digest."""
    stripped = state.rstrip()
    if not (stripped.startswith(b"{") and stripped.endswith(b"}")):
        raise ChainError("a stored state is not a JSON object")
    if _PREV_KEY[:-1] in stripped:
        raise ChainError("the event is already chained")
    separator = b"," if stripped[1:-1].strip() else b""
    body = stripped[:-1] + separator + _PREV_KEY + prev_digest.encode("ascii") + b'"}'
    digest = content_digest(originator_id, version, topic, body)
    return body[:-1] + _DIGEST_KEY + digest.encode("ascii") + b'"}', digest


def log_step(root: bytes, record: Record) -> bytes:
    """The running hash (raw bytes) after folding ``record`` into ``root``."""
    state = record.state
    header = (
        f"{record.position}\x1f{record.originator_id}\x1f{record.version}\x1f"
        f"{record.topic}\x1f{len(state)}\n"
    ).encode()
    return hashlib.sha256(root + header + state).digest()


def heads_digest(heads: Mapping[str, tuple[int, str]]) -> str:
    doc = {job: [version, digest] for job, (version, digest) in heads.items()}
    return hashlib.sha256(canonical_json(doc)).hexdigest()


def head_leaf(job: str, version: int, digest: str) -> bytes:
    """The Merkle leaf hash of one job's head."""
    if _plain(job) and _plain(digest):
        # The canonical JSON written out: a job id and a digest need no escaping.
        encoded = f'["{job}",{int(version)},"{digest}"]'.encode()
    else:
        encoded = canonical_json([job, version, digest])
    return hashlib.sha256(b"\x00" + encoded).digest()


def _plain(text: str) -> bool:
    return text.isprintable() and '"' not in text and "\\" not in text


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than ``size`` (``size`` > 1)."""
    return 1 << ((size - 1).bit_length() - 1)


def merkle_root(leaves: list[bytes]) -> bytes:
    """RFC 9162's Merkle tree hash of ``leaves`` (already leaf hashes); of none, the hash of
    nothing."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def inclusion_path(leaves: list[bytes], index: int) -> list[bytes]:
    """The sibling hashes from leaf ``index`` up to the root (RFC 9162, 2.1.3.1)."""
    if len(leaves) <= 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*inclusion_path(leaves[:k], index), merkle_root(leaves[k:])]
    return [*inclusion_path(leaves[k:], index - k), merkle_root(leaves[:k])]


def root_from_path(leaf: bytes, index: int, size: int, path: list[bytes]) -> bytes | None:
    """The root that ``leaf`` at ``index`` of a tree of ``size`` leaves proves with ``path``
    (RFC 9162, 2.1.3.2); None when the path cannot belong to such a tree."""
    if not 0 <= index < size:
        return None
    fn, sn, node = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            node = _node(sibling, node)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            node = _node(node, sibling)
        fn >>= 1
        sn >>= 1
    return node if sn == 0 else None


def heads_leaves(heads: Mapping[str, tuple[int, str]]) -> list[tuple[str, bytes]]:
    """The heads' leaves in job id order, with their job ids."""
    return [(job, head_leaf(job, *heads[job])) for job in sorted(heads)]


def heads_root(heads: Mapping[str, tuple[int, str]]) -> str:
    return merkle_root([leaf for _, leaf in heads_leaves(heads)]).hex()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A signed statement: the log up to ``position`` holds ``count`` records whose running
    hash is ``root``, and these jobs (``heads``: id -> (version, digest)) stood so.

    The signature is over ``heads_sha256`` (not the heads themselves), so a checkpoint can be
    shown and verified without the job ids of its heads (to a tenant, for instance).
    """

    position: int
    count: int
    root: str
    recorded_at: str
    key_id: str
    heads: Mapping[str, tuple[int, str]] | None = field(default_factory=dict)
    """None when not shown; then ``heads_sha256`` is as given."""
    signature: str = ""
    heads_sha256: str = ""
    heads_root: str = ""
    """The heads' Merkle root (empty on a checkpoint recorded before roots were signed)."""

    def __post_init__(self) -> None:
        if self.heads is not None and not self.heads_sha256:
            object.__setattr__(self, "heads_sha256", heads_digest(self.heads))

    @property
    def heads_match(self) -> bool:
        if self.heads is None:
            return True
        if self.heads_root and heads_root(self.heads) != self.heads_root:
            return False
        return heads_digest(self.heads) == self.heads_sha256

    def body(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "count": self.count,
            "root": self.root,
            "recorded_at": self.recorded_at,
            "key_id": self.key_id,
            "heads_sha256": self.heads_sha256,
            **({"heads_root": self.heads_root} if self.heads_root else {}),
        }

    def message(self) -> bytes:
        """The bytes the signature is over."""
        return CHECKPOINT_DOMAIN + canonical_json(self.body())

    def heads_json(self) -> dict[str, list[Any]] | None:
        if self.heads is None:
            return None
        return {job: [v, d] for job, (v, d) in sorted(self.heads.items())}

    def to_json(self, *, with_heads: bool = True) -> dict[str, Any]:
        doc = {**self.body(), "signature": self.signature}
        if with_heads and self.heads is not None:
            doc["heads"] = self.heads_json()
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Checkpoint:
        raw = doc.get("heads")
        heads = (
            None if raw is None else {str(k): (int(v[0]), str(v[1])) for k, v in dict(raw).items()}
        )
        return cls(
            position=int(doc["position"]),
            count=int(doc["count"]),
            root=str(doc["root"]),
            recorded_at=str(doc["recorded_at"]),
            key_id=str(doc["key_id"]),
            heads=heads,
            signature=str(doc.get("signature") or ""),
            heads_sha256=str(doc.get("heads_sha256") or ""),
            heads_root=str(doc.get("heads_root") or ""),
        )
