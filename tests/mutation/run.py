"""`make mutation`: mutation testing of the security- and integrity-critical modules with
cosmic-ray, each module against the tests that cover it.

Runs in a copy of the committed tree (cosmic-ray edits the files it mutates), one session per
module, and prints for each module how many mutants the tests killed and the survivors (the
file, line and operator of each). The survivors that are explained, not killed, are listed in
EXPLAINED with the reason; a survivor not in that list makes the run exit 1.

    python tests/mutation/run.py [--only NAME ...] [--timeout SECONDS] [--keep DIR]

Not part of `make test`: a full run takes tens of minutes on two cores. The last result is in
docs/design/mutation.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTEST = f"{sys.executable} -m pytest -x -q -p no:randomly -p no:cacheprovider"


@dataclass(frozen=True)
class Target:
    name: str
    module: str
    tests: tuple[str, ...]


TARGETS = (
    Target("plugin", "adapters/auth/plugin.py", ("tests/integration/test_auth_plugin.py",)),
    Target("claims", "adapters/auth/claims.py", ("tests/integration/test_auth_tokens.py",)),
    Target("jwt", "adapters/auth/jwt_verifier.py", ("tests/integration/test_auth_tokens.py",)),
    Target(
        "tenant",
        "domain/tenant.py",
        ("tests/unit/domain/test_tenant.py", "tests/unit/entrypoints/http/test_two_tenants.py"),
    ),
    Target(
        "lease",
        "application/jobs/lease.py",
        (
            "tests/unit/application/jobs/test_lease_keeper.py",
            "tests/unit/application/jobs/test_job_lease.py",
            "tests/unit/application/jobs/test_fencing.py",
        ),
    ),
    Target(
        "sealing", "adapters/crypto/sealing.py", ("tests/unit/adapters/crypto/test_sealing.py",)
    ),
    Target(
        "signing", "adapters/crypto/signing.py", ("tests/unit/adapters/crypto/test_signing.py",)
    ),
    Target(
        "audit-signing",
        "adapters/crypto/audit_signing.py",
        (
            "tests/unit/adapters/crypto/test_audit_signing.py",
            "tests/unit/application/audit/test_verify.py",
        ),
    ),
    Target(
        "audit-chain",
        "domain/audit_chain.py",
        (
            "tests/unit/domain/test_audit_chain.py",
            "tests/unit/domain/test_heads_merkle.py",
            "tests/unit/domain/test_audit_vectors.py",
            "tests/unit/application/audit",
            "tests/unit/adapters/eventstore/test_chaining.py",
        ),
    ),
)

_ANNOTATION = (
    "a type annotation: with `from __future__ import annotations` it is never evaluated, so "
    "changing its `|` changes nothing that runs"
)
_ENUM_IS = "`is` and `==` agree on enum members and on a sentinel object (equivalent)"
_SLOTS = "`slots=True` only saves memory and forbids new attributes; no behaviour depends on it"
_STAR = (
    "the keyword-only `*` of a signature made `/` (positional-only before it): every caller "
    "passes the arguments after it by name and those before it by position (equivalent)"
)
_INTERNED = "`is` and `==` agree on the interned literals 'internal' and 'external' (equivalent)"
_SMALL_INT = "`is not` and `!=` agree on small integers, which CPython caches (equivalent)"
_BUFFER = (
    "the spare room given to cryptography's update_into: GCM writes exactly the input's "
    "length, so any size at least that gives the same bytes"
)

EXPLAINED: dict[tuple[str, str, str], str] = {
    # application/jobs/lease.py
    (
        "application/jobs/lease.py",
        "def lease_ends(job: Job, hold: LeaseHold | None) -> datetime | None:",
        "*",
    ): _ANNOTATION,
    (
        "application/jobs/lease.py",
        "def lease_expired(job: Job, hold: LeaseHold | None, now: datetime) -> bool:",
        "*",
    ): _ANNOTATION,
    (
        "application/jobs/lease.py",
        "return job.lease_until if job.phase is Phase.CLAIMED else None",
        "core/ReplaceComparisonOperator_Is_Eq",
    ): _ENUM_IS,
    (
        "application/jobs/lease.py",
        "return job.phase is Phase.CLAIMED and ends is not None and ends <= now",
        "core/ReplaceComparisonOperator_Is_Eq",
    ): _ENUM_IS,
    ("application/jobs/lease.py", "@dataclass(slots=True)", "core/ReplaceTrueWithFalse"): _SLOTS,
    (
        "application/jobs/lease.py",
        "_unreachable: bool = field(default=False, init=False)",
        "core/ReplaceFalseWithTrue",
    ): (
        "`init=False` made True: `_unreachable` becomes a constructor argument no caller "
        "passes (its `default=False` made True is killed)"
    ),
    (
        "application/jobs/lease.py",
        "if not timedelta(0) <= self.fresh_for <= self.lease / 2:",
        "core/ReplaceBinaryOperator_Div_FloorDiv",
    ): ("`lease / 2` and `lease // 2` differ by under a microsecond (timedelta resolution)"),
    # domain/tenant.py
    (
        "domain/tenant.py",
        "def multi(cls, allowed: Collection[str] | None = None) -> Tenancy:",
        "*",
    ): _ANNOTATION,
    (
        "domain/tenant.py",
        "@dataclass(frozen=True, slots=True)",
        "core/ReplaceTrueWithFalse",
    ): _SLOTS,
    # adapters/crypto/sealing.py
    ("adapters/crypto/sealing.py", "_AES_BLOCK = 16", "core/NumberReplacer"): _BUFFER,
    ("adapters/crypto/sealing.py", "needed = start + size + _AES_BLOCK - 1", "*"): _BUFFER,
    ("adapters/crypto/sealing.py", "if len(self._buffer) < needed:", "*"): (
        "when the reused buffer is grown: any condition that leaves it large enough gives the "
        "same bytes (mutants that leave it too small fail update_into and are killed)"
    ),
    (
        "adapters/crypto/sealing.py",
        "if len(nonce) != NONCE_SIZE:",
        "core/ReplaceComparisonOperator_NotEq_IsNot",
    ): _SMALL_INT,
    ("adapters/crypto/sealing.py", "*,", "core/ReplaceBinaryOperator_Mul_Div"): _STAR,
    (
        "adapters/crypto/sealing.py",
        "if len(raw) < NONCE_SIZE + TAG_SIZE:",
        "core/ReplaceBinaryOperator_Add_BitOr",
    ): ("12 | 16 == 12 + 16 (equivalent)"),
    (
        "adapters/crypto/sealing.py",
        "if len(raw) < NONCE_SIZE + TAG_SIZE:",
        "core/ReplaceBinaryOperator_Add_BitXor",
    ): ("12 ^ 16 == 12 + 16 (equivalent)"),
    (
        "adapters/crypto/sealing.py",
        "blob: bytes, storage_key: bytes, hmac_key: bytes | None, expected_hmac: str | None",
        "*",
    ): _ANNOTATION,
    # adapters/crypto/signing.py
    ("adapters/crypto/signing.py", "def _text(value: object) -> str | None:", "*"): _ANNOTATION,
    (
        "adapters/crypto/signing.py",
        "def _timestamp(value: object) -> int | None:",
        "*",
    ): _ANNOTATION,
    ("adapters/crypto/signing.py", "max_age: int | None,", "*"): _ANNOTATION,
    (
        "adapters/crypto/signing.py",
        'if purpose == "internal":',
        "core/ReplaceComparisonOperator_Eq_Is",
    ): _INTERNED,
    (
        "adapters/crypto/signing.py",
        'if purpose == "external":',
        "core/ReplaceComparisonOperator_Eq_Is",
    ): _INTERNED,
    (
        "adapters/crypto/signing.py",
        "self, *, tenant: str, exchange: str, routing_key: str, body: bytes, timestamp: int",
        "core/ReplaceBinaryOperator_Mul_Div",
    ): _STAR,
    ("adapters/crypto/signing.py", "*,", "core/ReplaceBinaryOperator_Mul_Div"): _STAR,
    # adapters/auth/plugin.py
    (
        "adapters/auth/plugin.py",
        "if not allowed and permission is Permission.FETCHER_HISTORY:",
        "core/ReplaceComparisonOperator_Is_Eq",
    ): _ENUM_IS,
    (
        "adapters/auth/plugin.py",
        "def __init__(self, address: str, *, timeout: float = 5.0) -> None:",
        "core/ReplaceBinaryOperator_Mul_Div",
    ): _STAR,
    # adapters/crypto/audit_signing.py
    (
        "adapters/crypto/audit_signing.py",
        "def from_ring(cls, ring: KeyRing, configured: str | None = None) -> AuditKeys:",
        "*",
    ): _ANNOTATION,
    # domain/audit_chain.py
    (
        "domain/audit_chain.py",
        "def split_linked(state: bytes) -> tuple[bytes, str | None]:",
        "*",
    ): _ANNOTATION,
    ("domain/audit_chain.py", "def prev_digest_of(body: bytes) -> str | None:", "*"): _ANNOTATION,
    (
        "domain/audit_chain.py",
        "def heads_json(self) -> dict[str, list[Any]] | None:",
        "*",
    ): _ANNOTATION,
    (
        "domain/audit_chain.py",
        "def to_json(self, *, with_heads: bool = True) -> dict[str, Any]:",
        "core/ReplaceBinaryOperator_Mul_Div",
    ): _STAR,
    (
        "domain/audit_chain.py",
        "@dataclass(frozen=True, slots=True)",
        "core/ReplaceTrueWithFalse",
    ): _SLOTS,
    (
        "domain/audit_chain.py",
        'separator = b"," if stripped[1:-1].strip() else b""',
        "*",
    ): (
        "the bounds of the slice that tells an empty object: for a JSON object, `[1:-1]`, "
        "`[2:-1]` and `[1:-2]` (`-1` as `~1`) are blank exactly when the object is empty"
    ),
    (
        "domain/audit_chain.py",
        'value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False',
        "core/ReplaceFalseWithTrue",
    ): (
        "`ensure_ascii` and `allow_nan` made True: what is encoded (ids, hex digests, integers, "
        "RFC 3339 times, key ids) is ASCII and has no NaN, so the bytes are the same"
    ),
    # domain/audit_chain.py: the heads' Merkle tree
    (
        "domain/audit_chain.py",
        "def root_from_path(leaf: bytes, index: int, size: int, path: list[bytes])"
        " -> bytes | None:",
        "*",
    ): _ANNOTATION,
    ("domain/audit_chain.py", "if len(leaves) == 1:", "core/ReplaceComparisonOperator_Eq_LtE"): (
        "`== 1` made `<= 1` after the empty list was answered: the length is at least 1"
    ),
    ("domain/audit_chain.py", "return leaves[0]", "core/NumberReplacer"): (
        "the only leaf of a one-leaf tree: `leaves[0]` and `leaves[-1]` are the same"
    ),
    ("domain/audit_chain.py", "if len(leaves) <= 1:", "core/ReplaceComparisonOperator_LtE_Eq"): (
        "an inclusion path is only asked for a leaf of a checkpoint's heads, which are never "
        "empty: `<= 1` and `== 1` agree on every list it is given"
    ),
    (
        "domain/audit_chain.py",
        "return [*inclusion_path(leaves[k:], index - k), merkle_root(leaves[:k])]",
        "*",
    ): (
        "in the right subtree `k <= index < 2k` with `k` a power of two, so `index - k`, "
        "`index % k` and `index ^ k` are the same number"
    ),
    ("domain/audit_chain.py", "if sn == 0:", "core/ReplaceComparisonOperator_Eq_LtE"): (
        "`sn` is never negative (it starts at `size - 1` and is only halved), so `== 0` and "
        "`<= 0` agree"
    ),
    ("domain/audit_chain.py", "if fn & 1 or fn == sn:", "*"): (
        "`fn <= sn` always (the index is below the size and both are halved together), so "
        "`fn == sn` and `fn >= sn` agree; `is` agrees on the small integers compared"
    ),
    ("domain/audit_chain.py", "if not fn & 1:", "core/ReplaceBinaryOperator_BitAnd_Mod"): (
        "`fn % 1` is 0, so the loop below is always entered; when `fn` is odd its condition "
        "is false at once: the same as not entering it"
    ),
    ("domain/audit_chain.py", "if not fn & 1:", "core/NumberReplacer"): (
        "`fn & 0` is 0, so the loop below is always entered; when `fn` is odd its condition "
        "is false at once: the same as not entering it (`fn & 2` is killed)"
    ),
    ("domain/audit_chain.py", "return node if sn == 0 else None", "*"): (
        "`sn` is never negative: `>= 0`, `<= 0` and `== 0` agree"
    ),
    # adapters/auth/jwt_verifier.py
    ("adapters/auth/jwt_verifier.py", "*,", "core/ReplaceBinaryOperator_Mul_Div"): _STAR,
    ("adapters/auth/jwt_verifier.py", "names: ClaimNames | None = None,", "*"): _ANNOTATION,
    (
        "adapters/auth/jwt_verifier.py",
        "def __init__(self, names: ClaimNames | None = None) -> None:",
        "*",
    ): _ANNOTATION,
    ("adapters/auth/jwt_verifier.py", "leeway: float = 30.0,", "core/NumberReplacer"): (
        "the default leeway's exact value (30 s, documented): only a test timed to the wall "
        "clock's second could tell 29 or 31 from 30"
    ),
    # adapters/auth/claims.py
    (
        "adapters/auth/claims.py",
        "@dataclass(frozen=True, slots=True)",
        "core/ReplaceTrueWithFalse",
    ): _SLOTS,
    (
        "adapters/auth/plugin.py",
        "if not 200 <= status < 300 or answer is _UNREADABLE:",
        "core/ReplaceComparisonOperator_Is_Eq",
    ): _ENUM_IS,
    (
        "adapters/auth/plugin.py",
        "if not 200 <= status < 300 or answer is _UNREADABLE:",
        "core/NumberReplacer",
    ): (
        "`200 <=` made `199 <=`: no server answers a final status below 200 (1xx are "
        "interim); 300 and 299 are tested"
    ),
    (
        "adapters/auth/plugin.py",
        "if value is _MISSING:",
        "core/ReplaceComparisonOperator_Is_Eq",
    ): _ENUM_IS,
    (
        "adapters/auth/plugin.py",
        "def __init__(self, address: str, *, timeout: float = 5.0) -> None:",
        "core/NumberReplacer",
    ): (
        "the default timeout's exact value (5 s, documented); tests pass a short one so as not "
        "to wait five seconds, and the timeout itself is tested"
    ),
}
"""(module, the mutated line's code, operator, or ``*`` for every operator on the line) →
why the surviving mutant is acceptable (equivalent, or outside what a test can observe). Keyed
by the line's code, not its number, so an edit elsewhere in the module keeps every entry; a
changed line is a new mutant to look at. See docs/design/mutation.md."""


def explanation(module: str, code: str, operator: str) -> str:
    return EXPLAINED.get((module, code, operator)) or EXPLAINED.get((module, code, "*"), "")


def _config(target: Target, timeout: float) -> str:
    tests = " ".join(target.tests)
    return (
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{PYTEST} {tests}"\n'
        "\n[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )


def _cosmic(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = Path(sys.executable).with_name("cosmic-ray")
    return subprocess.run(
        [str(binary), *args], cwd=tree, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip


def run(target: Target, tree: Path, timeout: float) -> dict[str, object]:
    config = tree / f"mutation-{target.name}.toml"
    session = tree / f"mutation-{target.name}.sqlite"
    config.write_text(_config(target, timeout))
    started = time.monotonic()
    baseline = subprocess.run(
        [*PYTEST.split(), *target.tests], cwd=tree, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    if baseline.returncode != 0:
        raise SystemExit(
            f"the tests of {target.name} fail unmutated; fix them first:\n"
            + baseline.stdout[-3000:]
        )
    init = _cosmic(tree, "init", str(config), str(session))
    if init.returncode != 0:
        raise SystemExit(f"cosmic-ray init failed for {target.name}: {init.stderr[-2000:]}")
    _cosmic(tree, "exec", str(config), str(session))
    dump = _cosmic(tree, "dump", str(session))
    killed = survived = incompetent = 0
    survivors: list[dict[str, object]] = []
    source = (tree / target.module).read_text().splitlines()
    for line in dump.stdout.splitlines():
        item, result = json.loads(line)
        if result is None:
            continue
        outcome = result.get("test_outcome")
        if outcome == "killed":
            killed += 1
        elif outcome == "survived":
            survived += 1
            for mutation in item["mutations"]:
                start = mutation["start_pos"][0]
                key = (target.module, source[start - 1].strip(), mutation["operator_name"])
                survivors.append(
                    {
                        "line": start,
                        "operator": mutation["operator_name"],
                        "occurrence": mutation["occurrence"],
                        "explained": explanation(*key),
                    }
                )
        else:
            incompetent += 1
    return {
        "target": target.name,
        "module": target.module,
        "killed": killed,
        "survived": survived,
        "incompetent": incompetent,
        "seconds": round(time.monotonic() - started),
        "survivors": survivors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="target names (default: all)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    parser.add_argument("--keep", type=Path, help="keep the working tree and sessions here")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    targets = [t for t in TARGETS if not args.only or t.name in args.only]
    tree = args.keep or Path(tempfile.mkdtemp(prefix="fetcher-mutation-"))
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    results = []
    unexplained = 0
    try:
        for target in targets:
            result = run(target, tree, args.timeout)
            results.append(result)
            print(
                f"{target.name:<14} {target.module:<36} killed {result['killed']:>4}  "
                f"survived {result['survived']:>3}  incompetent {result['incompetent']:>3}  "
                f"{result['seconds']:>5} s",
                flush=True,
            )
            for survivor in result["survivors"]:  # type: ignore[attr-defined]
                note = survivor["explained"] or "UNEXPLAINED"
                unexplained += not survivor["explained"]
                print(f"    line {survivor['line']:>4} {survivor['operator']}: {note}")
    finally:
        if args.keep is None:
            shutil.rmtree(tree, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"{unexplained} survivor(s) neither killed nor explained")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
