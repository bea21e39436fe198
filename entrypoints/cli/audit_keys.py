"""``fetcher keys audit-public``: the public key that verifies audit checkpoints."""

from __future__ import annotations

import argparse
import sys

from adapters.crypto.audit_signing import AuditKeys, InvalidAuditKey, encode_public
from adapters.crypto.keys import InvalidMasterKey, KeyRing
from entrypoints.cli.commands import Commands, command, master_key_text, print_key
from entrypoints.settings import ToolSettings


def _audit_public(args: argparse.Namespace) -> int:
    settings = ToolSettings.from_env()
    text = master_key_text(settings.keys.master_key, args.key)
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
    print_key(text, label, raw=args.raw)
    return 0


def add_audit_public_key(kinds: Commands) -> None:
    parser = command(
        kinds,
        "audit-public",
        _audit_public,
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
