"""``fetcher keys audit-public``: the public key that verifies audit checkpoints."""

from __future__ import annotations

import argparse
import sys

from adapters.crypto.audit_signing import AuditKeys, InvalidAuditKey, encode_public
from adapters.crypto.keys import InvalidMasterKey, KeyRing
from entrypoints.settings import ToolSettings


def _master_key_text(flag: str | None, settings: ToolSettings) -> str:
    """APP_ENC_KEY, else the first line of piped stdin, else --key (as the other keys)."""
    text = settings.keys.master_key or ""
    if not text and sys.stdin is not None and not sys.stdin.isatty():
        try:
            text = sys.stdin.readline().strip()
        except (OSError, ValueError, UnicodeDecodeError):
            text = ""
    return text or (flag or "").strip()


def _audit_public(args: argparse.Namespace) -> int:
    settings = ToolSettings.from_env()
    text = _master_key_text(args.key, settings)
    try:
        ring = KeyRing(text, settings.keys.version, settings.keys.previous or None)
        keys = AuditKeys.from_ring(ring, settings.audit_signing_key)
    except (InvalidMasterKey, InvalidAuditKey) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    if args.all:
        for key_id, public in keys.publics.items():
            print(f"{key_id} {encode_public(public)}")
        return 0
    text = encode_public(keys.signer.public_key)
    label = f"Audit Public Key (base64, key id {keys.signer.key_id})"
    print(text if args.raw else f"{label}: {text}")
    return 0


def add_audit_public_key(kinds: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = kinds.add_parser(
        "audit-public",
        help="the Ed25519 public key that verifies audit checkpoints",
        description="Print the public key of the audit checkpoint signer (base64, 32 bytes): "
        "FETCHER_AUDIT_SIGNING_KEY's, else the one derived from the master key.",
    )
    parser.add_argument("--key", "-key", metavar="BASE64", help="base64 master key")
    parser.add_argument(
        "--raw",
        action="store_true",
        help="print the bare key: KEY=$(fetcher keys audit-public --raw)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="print '<key id> <public key>' for every key version (APP_ENC_KEYS_PREVIOUS too)",
    )
    parser.set_defaults(func=_audit_public)
