"""``fetcher keys audit-public``: the public key that verifies audit checkpoints."""

from __future__ import annotations

import argparse
import os
import sys

from adapters.crypto.audit_signing import AuditKeys, InvalidAuditKey, encode_public
from adapters.crypto.keys import InvalidMasterKey, KeyRing


def _master_key_text(flag: str | None) -> str:
    """APP_ENC_KEY, else the first line of piped stdin, else --key (as the other keys)."""
    text = os.environ.get("APP_ENC_KEY", "").strip()
    if not text and sys.stdin is not None and not sys.stdin.isatty():
        try:
            text = sys.stdin.readline().strip()
        except (OSError, ValueError, UnicodeDecodeError):
            text = ""
    return text or (flag or "").strip()


def _audit_public(args: argparse.Namespace) -> int:
    text = _master_key_text(args.key)
    configured = os.environ.get("FETCHER_AUDIT_SIGNING_KEY", "").strip() or None
    try:
        ring = KeyRing(
            text,
            os.environ.get("APP_ENC_KEY_VERSION", "") or "1",
            os.environ.get("APP_ENC_KEYS_PREVIOUS") or None,
        )
        keys = AuditKeys.from_ring(ring, configured)
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
