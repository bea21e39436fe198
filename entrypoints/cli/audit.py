"""``fetcher audit export`` and ``fetcher audit verify``, and ``fetcher keys audit-public``.

``verify`` reads the event store the service's settings name (FETCHER_DATABASE_URL or the
SQLite files in FETCHER_DATA_DIR), or with ``--bundle`` an exported bundle, offline, with only
the public key(s). Exit status: 0 when everything verifies, 1 at the first break, 2 when the
verification could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from adapters.audit.bundle_lines import decode_event_line
from adapters.crypto.audit_signing import (
    AuditKeys,
    Ed25519CheckpointKeys,
    InvalidAuditKey,
    decode_public,
    fingerprint,
)
from adapters.crypto.keys import InvalidMasterKey, KeyRing
from application.audit.bundle import (
    Bound,
    Bundle,
    BundleError,
    export_lines,
    read_bundle,
    verify_bundle,
    verify_bundle_file,
    verify_store,
)
from application.audit.proof import ProofError, check_proof
from application.audit.verify import VerifyReport
from application.audit.witness import PREFIX as WITNESS_PREFIX
from application.audit.witness import read_witness
from application.timefmt import rfc3339nano
from domain.audit_chain import Checkpoint
from domain.errors import FetcherError
from entrypoints.cli.commands import Commands, command, group
from entrypoints.settings import Settings, SettingsError, ToolSettings

if TYPE_CHECKING:
    from adapters.audit.checkpoints import SqlCheckpointStore
    from adapters.eventstore.store import EventStore

# The composition (database, storage and broker drivers) is imported by the commands that open
# the service's stores, not at import: an offline check of a bundle or a proof needs none of it
# and runs in a third of the memory.


class AuditToolError(Exception):
    pass


def _err(text: str) -> None:
    print(text, file=sys.stderr)


def _bound(text: str | None, name: str) -> Bound:
    if text is None:
        return None
    value = text.strip()
    if value.isascii() and value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise AuditToolError(f"{name} must be a log position or an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise AuditToolError(f"{name} needs a time zone offset (Z or +hh:mm)")
    return moment


@contextlib.asynccontextmanager
async def _open_store(
    settings: Settings,
) -> AsyncIterator[tuple[EventStore, SqlCheckpointStore]]:
    from entrypoints.composition.infrastructure import (
        open_checkpoint_store,
        open_database_engine,
        open_event_store,
    )

    database = settings.database
    if not database.configured and not database.event_store_file.exists():
        raise AuditToolError(f"no event store at {database.event_store_file}")
    async with (
        open_database_engine(settings) as engine,
        open_event_store(settings) as store,
        open_checkpoint_store(settings, engine) as checkpoints,
    ):
        yield store, checkpoints


def _key_ring() -> KeyRing | None:
    keys = ToolSettings.from_env().keys
    if keys.master_key is None:
        return None
    try:
        return keys.ring()
    except InvalidMasterKey as e:
        raise AuditToolError(f"APP_ENC_KEY: {e}") from None


def _public_key_text(value: str) -> str:
    path = Path(value)
    if len(value) != 44 and path.is_file():
        return path.read_text().strip()
    return value


def _keys(public_keys: Sequence[str], ring: KeyRing | None) -> Ed25519CheckpointKeys:
    pairs = []
    try:
        publics = [decode_public(_public_key_text(k)) for k in public_keys]
        if ring is not None:
            configured = ToolSettings.from_env().audit_signing_key
            pairs = list(AuditKeys.from_ring(ring, configured).publics.items())
    except InvalidAuditKey as e:
        raise AuditToolError(str(e)) from None
    return Ed25519CheckpointKeys([*pairs, *((fingerprint(p), p) for p in publics)])


def _progress(args: argparse.Namespace) -> Callable[[int, int], None] | None:
    """A running count on a terminal's stderr (none with ``--quiet`` or when not a
    terminal)."""
    if args.quiet or not sys.stderr.isatty():
        return None

    def show(records: int, position: int) -> None:
        sys.stderr.write(f"\rverified {records:,} records (position {position:,})")
        sys.stderr.flush()

    return show


def _print_report(report: VerifyReport, as_json: bool, quiet: bool = False) -> int:
    if sys.stderr.isatty() and not quiet:
        sys.stderr.write("\r\033[K")
    if quiet:
        return 0 if report.ok else 1
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.summary())
    return 0 if report.ok else 1


def _read_bundle(path: str) -> Bundle:
    try:
        if path == "-":
            return read_bundle(sys.stdin, decode_event=decode_event_line)
        with open(path, encoding="utf-8") as f:
            return read_bundle(f, decode_event=decode_event_line)
    except OSError as e:
        raise AuditToolError(f"cannot read {path}: {e.strerror or e}") from None
    except BundleError as e:
        raise AuditToolError(f"{path}: {e}") from None


def _verify_bundle(
    args: argparse.Namespace, against: Bundle | None, witnessed: list[Checkpoint] | None
) -> int:
    if not args.public_key:
        raise AuditToolError("--bundle needs --public-key (fetcher keys audit-public)")
    keys = _keys(args.public_key, None)
    if args.bundle != "-" and against is None and witnessed is None:
        try:
            report = verify_bundle_file(
                Path(args.bundle), keys, progress=_progress(args), decode_event=decode_event_line
            )
        except OSError as e:
            raise AuditToolError(f"cannot read {args.bundle}: {e.strerror or e}") from None
        except BundleError as e:
            raise AuditToolError(f"{args.bundle}: {e}") from None
        return _print_report(report, args.json, args.quiet)
    report = verify_bundle(_read_bundle(args.bundle), keys, against=against, witnessed=witnessed)
    return _print_report(report, args.json, args.quiet)


def _read_witnesses(source: str) -> list[Checkpoint]:
    """The checkpoints witnessed: from the configured object storage (``storage``), or every
    ``*.json`` file below a folder (a copy of the storage's ``audit/checkpoints/``)."""
    if source == "storage":

        async def listed() -> list[tuple[str, bytes]]:
            from entrypoints.composition.infrastructure import open_result_storage

            async with open_result_storage(Settings.from_env()) as storage:
                return await storage.kept(WITNESS_PREFIX)

        try:
            items = asyncio.run(listed())
        except FetcherError as e:
            raise AuditToolError(f"cannot read the witnesses in object storage: {e}") from None
    else:
        folder = Path(source)
        if not folder.is_dir():
            raise AuditToolError(f"--witness {source}: not a folder (or 'storage')")
        items = [(str(path), path.read_bytes()) for path in sorted(folder.rglob("*.json"))]
    witnessed = []
    for name, data in items:
        try:
            witnessed.append(read_witness(data))
        except (ValueError, KeyError, TypeError):
            raise AuditToolError(f"{name} is not a witnessed checkpoint") from None
    return witnessed


def _verify(args: argparse.Namespace) -> int:
    against = _read_bundle(args.against) if args.against else None
    witnessed = _read_witnesses(args.witness) if args.witness else None
    if args.bundle:
        return _verify_bundle(args, against, witnessed)
    ring = _key_ring()
    if ring is None and not args.public_key:
        raise AuditToolError("no key: set APP_ENC_KEY, or pass --public-key")
    keys = _keys(args.public_key or (), ring)
    settings = Settings.from_env()

    async def run() -> VerifyReport:
        async with _open_store(settings) as (store, checkpoints):
            return await verify_store(
                store,
                checkpoints,
                keys,
                against=against,
                witnessed=witnessed,
                progress=_progress(args),
            )

    return _print_report(asyncio.run(run()), args.json, args.quiet)


def _export(args: argparse.Namespace) -> int:
    since, until = _bound(args.since, "--since"), _bound(args.until, "--until")
    exported_at = rfc3339nano(datetime.now(UTC))
    settings = Settings.from_env()

    async def run(out: TextIO) -> int:
        count = 0
        async with _open_store(settings) as (store, checkpoints):
            async for line in export_lines(store, checkpoints, since, until, exported_at):
                out.write(line + "\n")
                count += 1
        return count

    if args.out in (None, "-"):
        count = asyncio.run(run(sys.stdout))
    else:
        try:
            with open(args.out, "w", encoding="utf-8") as out:
                count = asyncio.run(run(out))
        except OSError as e:
            raise AuditToolError(f"cannot write {args.out}: {e.strerror or e}") from None
    _err(f"exported {max(0, count - 1)} lines")
    return 0


def _verify_job(args: argparse.Namespace) -> int:
    """A job's inclusion proof (``GET /v1/fetcher/{id}/proof``), checked offline."""
    if not args.public_key:
        raise AuditToolError("--public-key is required (fetcher keys audit-public)")
    try:
        text = sys.stdin.read() if args.proof == "-" else Path(args.proof).read_text()
        doc = json.loads(text)
    except OSError as e:
        raise AuditToolError(f"cannot read {args.proof}: {e.strerror or e}") from None
    except ValueError:
        raise AuditToolError(f"{args.proof} is not JSON") from None
    if not isinstance(doc, dict):
        raise AuditToolError(f"{args.proof} is not a job proof")
    try:
        result = check_proof(doc, _keys(args.public_key, None))
    except ProofError as e:
        raise AuditToolError(str(e)) from None
    if args.json:
        print(
            json.dumps(
                {
                    "jobId": doc.get("jobId"),
                    "ok": result.ok,
                    "problems": list(result.problems),
                    "checked": list(result.checked),
                }
            )
        )
    else:
        print(f"job {doc.get('jobId')}")
        for item in result.checked:
            print(f"checked: {item}")
        for problem in result.problems:
            print(f"FAIL: {problem}")
        if result.ok:
            print("OK")
    return 0 if result.ok else 1


def _main(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except AuditToolError as e:
            _err(f"Error: {e}")
            return 2
        except SettingsError as e:
            _err(f"fetcher: configuration error: {e}")
            return 2
        except FetcherError as e:
            _err(f"Error: {e.message}")
            return 2

    return run


def _public_key_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--public-key",
        action="append",
        metavar="BASE64|FILE",
        help="an audit public key (repeat for rotated keys)",
    )


def add_audit_commands(subparsers: Commands) -> None:
    actions = group(
        subparsers,
        "audit",
        help="export and verify the tamper-evident job history",
        description="The job history is chained (each event carries its digest and its "
        "predecessor's) and the log is covered by signed checkpoints.",
    )
    export = command(
        actions,
        "export",
        _main(_export),
        help="write an audit bundle (JSON lines): events and the checkpoints covering them",
        description="Write the records from the last checkpoint at or before --since to the "
        "first checkpoint at or after --until, with those checkpoints. --since and --until are "
        "log positions or RFC 3339 times; without them, the whole log.",
    )
    export.add_argument("--since", metavar="POSITION|TIME")
    export.add_argument("--until", metavar="POSITION|TIME")
    export.add_argument("--out", metavar="FILE", help="write here (default: stdout)")
    verify = command(
        actions,
        "verify",
        _main(_verify),
        help="check every chain and checkpoint; name the first break",
        description="Verify the event store of the service's settings (keys from APP_ENC_KEY), "
        "or with --bundle an exported bundle offline, with --public-key only. Exit status 0: "
        "verified; 1: a break (changed, missing, reordered, unsigned, bad signature); 2: could "
        "not verify.",
    )
    verify.add_argument("--bundle", metavar="FILE", help="an exported bundle, or - for stdin")
    _public_key_argument(verify)
    verify.add_argument(
        "--against",
        metavar="OLD_BUNDLE",
        help="a bundle exported earlier: the store (or --bundle) must extend it, nothing it "
        "held changed or gone (a rollback is named)",
    )
    verify.add_argument(
        "--witness",
        metavar="FOLDER|storage",
        help="the checkpoints kept outside the database (FETCHER_AUDIT_WITNESS): a folder "
        "holding them (a copy of the bucket's audit/checkpoints/), or 'storage' for the "
        "configured object storage; a checkpoint witnessed but gone or changed is named",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing, not even progress; the exit status tells (0 verified, 1 a break)",
    )
    proof = command(
        actions,
        "verify-job",
        _main(_verify_job),
        help="check one job's inclusion proof offline (a tenant's auditor)",
        description="Check a proof from GET /v1/fetcher/{id}/proof with the audit public key "
        "only: the job's chain of events, the Merkle path from its last event to the "
        "checkpoint's signed heads root, and the checkpoint's signature. It shows no other "
        "job. Exit status 0: verified; 1: a problem (named); 2: could not verify.",
    )
    proof.add_argument("--proof", required=True, metavar="FILE", help="the proof, or - for stdin")
    _public_key_argument(proof)
    proof.add_argument("--json", action="store_true", help="print the result as JSON")
