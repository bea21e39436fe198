"""Consumer and operator tools: derive the keys a consumer needs, verify an event signature,
decrypt a stored result. Keys are printed only by the two ``keys`` commands."""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.crypto.keys import (
    EXTERNAL_HMAC_INFO,
    STORAGE_ENCRYPTION_INFO,
    InvalidMasterKey,
    KeyRing,
    KeySet,
    decode_master_key,
    derive,
)
from adapters.crypto.sealing import (
    ResultDecryptionFailed,
    ResultHmacMismatch,
    ResultOpenFailed,
    decrypt_result,
    hmac_matches,
)
from adapters.crypto.signing import HmacMessageSigner
from application.errors import InvalidSignature
from entrypoints.cli.audit_keys import add_audit_public_key
from entrypoints.cli.commands import Commands, command, group, master_key_text, print_key
from entrypoints.settings import ToolSettings

_HEX_64 = re.compile(r"[0-9a-fA-F]{64}")
_NO_KEY_HELP = (
    "Error: No master key provided\n\n"
    "Provide the key via:\n"
    "  - APP_ENC_KEY environment variable (recommended)\n"
    "  - stdin (pipe or redirect)\n"
    "  - --key flag (not recommended: it shows in the process list)\n\n"
)
_BAD_KEY_HINT = "\nHint: Ensure your key is valid base64 and at least 32 bytes when decoded.\n"


class ToolError(Exception):
    """A failure reported to the user as one line, ``Error: <message>``."""


def _err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def _print_usage(parser: argparse.ArgumentParser) -> None:
    parser.print_usage(sys.stderr)


# --- fetcher keys ------------------------------------------------------------------------------


def _derive_key_command(
    info: str, label: str, print_usage: Callable[[], None], args: argparse.Namespace
) -> int:
    text = master_key_text(ToolSettings.from_env().keys.master_key, args.key)
    if not text:
        _err(_NO_KEY_HELP)
        print_usage()
        return 1
    try:
        master = decode_master_key(text)
    except InvalidMasterKey as e:
        _err(f"Error: {e}\n{_BAD_KEY_HINT}")
        return 1
    key = derive(master, info).hex()
    print_key(key, f"{label} (hex)", raw=args.raw)
    return 0


def _add_keys(subparsers: Commands) -> None:
    kinds = group(
        subparsers,
        "keys",
        metavar="KIND",
        help="derive the keys a consumer needs from the master key",
        description="Derive a key for consumers from the master key, so they never hold it. "
        "Master key source, first match wins: APP_ENC_KEY, the first line of piped stdin, --key.",
    )
    for name, info, label, help_text in (
        (
            "external-hmac",
            EXTERNAL_HMAC_INFO,
            "External HMAC Key",
            "the key that verifies event signatures and result HMACs",
        ),
        (
            "storage",
            STORAGE_ENCRYPTION_INFO,
            "Storage Encryption Key",
            "the key that decrypts stored results",
        ),
    ):
        parser = kinds.add_parser(name, help=help_text, description=f"Print {help_text}, in hex.")
        parser.add_argument(
            "--key",
            "-key",
            metavar="BASE64",
            help="base64 master key (not recommended: use APP_ENC_KEY or stdin)",
        )
        parser.add_argument(
            "--raw",
            action="store_true",
            help="print the bare hex key, without a label: KEY=$(fetcher keys ... --raw)",
        )
        usage = functools.partial(_print_usage, parser)
        parser.set_defaults(func=functools.partial(_derive_key_command, info, label, usage))
    add_audit_public_key(kinds)


# --- shared key and input handling ------------------------------------------------------------


def _hex_key(text: str, source: str) -> bytes:
    value = text.strip()
    if not _HEX_64.fullmatch(value):
        raise ToolError(f"{source} must be 64 hexadecimal characters (a 32-byte key)")
    return bytes.fromhex(value)


def _ring_from_env(settings: ToolSettings) -> KeyRing | None:
    if settings.keys.master_key is None:
        return None
    try:
        return settings.keys.ring()
    except InvalidMasterKey as e:
        raise ToolError(f"APP_ENC_KEY: {e}") from None


@dataclass(frozen=True, slots=True)
class _KeySource:
    """Where a tool finds a key: the flag ``option``, else the setting ``setting`` (read by
    ``configured``), else each key version ``derived`` from APP_ENC_KEY."""

    option: str
    setting: str
    configured: Callable[[ToolSettings], str | None]
    derived: Callable[[KeySet], bytes]
    what: str

    @property
    def order(self) -> str:
        """Where the key comes from, in a command's description."""
        return f"{self.option}, else {self.setting}, else derived from APP_ENC_KEY"

    def add_option(self, parser: argparse.ArgumentParser, name: str) -> None:
        parser.add_argument(self.option, metavar="HEX", help=f"{name}, 64 hex characters")

    def keys(self, flag: str | None) -> list[bytes]:
        """The keys to try, from the first source that gives one."""
        settings = ToolSettings.from_env()
        if flag:
            return [_hex_key(flag, self.option)]
        if env := self.configured(settings):
            return [_hex_key(env, self.setting)]
        if ring := _ring_from_env(settings):
            return [self.derived(keys) for keys in ring]
        raise ToolError(
            f"no {self.what} key: pass {self.option}, or set {self.setting} or APP_ENC_KEY"
        )


_EXTERNAL_HMAC = _KeySource(
    "--hmac-key",
    "FETCHER_EXTERNAL_HMAC_KEY",
    lambda settings: settings.external_hmac_key,
    lambda keys: keys.external_hmac,
    "HMAC",
)
_STORAGE = _KeySource(
    "--storage-key",
    "FETCHER_STORAGE_KEY",
    lambda settings: settings.storage_key,
    lambda keys: keys.storage,
    "storage",
)


def _read_input(path: str) -> bytes:
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is not None:
            data: bytes = stream.read()
            return data
        return str(sys.stdin.read()).encode("utf-8")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None


def _parse_json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        lines = [line for line in data.splitlines() if line.strip()]
        if len(lines) > 1:
            raise ToolError(f"{what} must hold one JSON message, not {len(lines)} lines") from None
        raise ToolError(f"{what} is not valid JSON") from None


@dataclass(frozen=True, slots=True)
class _Message:
    exchange: str
    routing_key: str
    headers: dict[str, object]
    body: str


def _message(doc: Any, what: str) -> _Message:
    if not isinstance(doc, dict):
        raise ToolError(f"{what} must be a JSON object")
    for field, kind in (
        ("exchange", str),
        ("routingKey", str),
        ("headers", dict),
        ("body", str),
    ):
        if not isinstance(doc.get(field), kind):
            expected = "an object" if kind is dict else "a string"
            raise ToolError(f"{what}: field '{field}' must be {expected}")
    return _Message(doc["exchange"], doc["routingKey"], doc["headers"], doc["body"])


# --- fetcher event verify ---------------------------------------------------------------------


def _verify_event(args: argparse.Namespace) -> int:
    try:
        message = _message(_parse_json(_read_input(args.file), "message"), "message")
        signer = HmacMessageSigner(_EXTERNAL_HMAC.keys(args.hmac_key))
    except ToolError as e:
        _err(f"Error: {e}")
        return 1
    try:
        signer.verify(
            headers=message.headers,
            exchange=message.exchange,
            routing_key=message.routing_key,
            body=message.body.encode("utf-8", "surrogatepass"),
            now=int(time.time()),
            max_age=args.max_age,
        )
    except InvalidSignature as e:
        _err(f"signature invalid: {e}")
        return 1
    print("signature valid")
    return 0


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _add_event(subparsers: Commands) -> None:
    actions = group(subparsers, "event", help="check published job events")
    verify = command(
        actions,
        "verify",
        _verify_event,
        help="verify the signature of one event message",
        description='Verify one message given as JSON {"exchange", "routingKey", "headers", '
        f'"body"}} (a line of events.jsonl). The key is {_EXTERNAL_HMAC.order}.',
    )
    verify.add_argument("file", nargs="?", default="-", help="message JSON file (default: stdin)")
    _EXTERNAL_HMAC.add_option(verify, "external HMAC key")
    verify.add_argument(
        "--max-age",
        type=_seconds,
        metavar="SECONDS",
        help="also refuse signatures older than this (default: no age limit)",
    )


# --- fetcher result decrypt -------------------------------------------------------------------


def _event_hmac(path: str) -> str:
    doc = _parse_json(_read_input(path), "event")
    if isinstance(doc, dict) and isinstance(doc.get("body"), str) and "headers" in doc:
        doc = _parse_json(doc["body"].encode("utf-8", "surrogatepass"), "event body")
    result = doc.get("result") if isinstance(doc, dict) else None
    value = result.get("hmac") if isinstance(result, dict) else None
    if not isinstance(value, str):
        raise ToolError("the event has no result.hmac (only job.completed events carry one)")
    if not _HEX_64.fullmatch(value):
        raise ToolError("the event's result.hmac is not 64 hexadecimal characters")
    return value


def _decrypt_with_any(blob: bytes, storage_keys: Sequence[bytes]) -> bytes:
    failure: Exception = ToolError("no storage key")
    for key in storage_keys:
        try:
            return decrypt_result(blob, key)
        except ResultDecryptionFailed as e:
            failure = e
    raise failure


def _write_output(path: str | None, data: bytes) -> None:
    if path is None or path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise ToolError(f"cannot write {path}: {e.strerror or e}") from None


def _decrypt_result(args: argparse.Namespace) -> int:
    try:
        expected = args.hmac.strip() if args.hmac is not None else None
        if expected is not None and not _HEX_64.fullmatch(expected):
            raise ToolError("--hmac must be 64 hexadecimal characters")
        if args.event is not None:
            expected = _event_hmac(args.event)
        storage_keys = _STORAGE.keys(args.storage_key)
        hmac_keys = _EXTERNAL_HMAC.keys(args.hmac_key) if expected is not None else []
        plaintext = _decrypt_with_any(_read_input(args.file), storage_keys)
        if expected is not None and not any(
            hmac_matches(plaintext, key, expected) for key in hmac_keys
        ):
            raise ResultHmacMismatch(
                "result HMAC mismatch: the decrypted result does not match the expected HMAC"
            )
        _write_output(args.out, plaintext)
    except (ToolError, ResultOpenFailed) as e:
        _err(f"Error: {e}")
        return 1
    checked = "HMAC verified" if expected is not None else "HMAC not checked"
    _err(f"decrypted {len(plaintext)} bytes; {checked}")
    return 0


def _add_result(subparsers: Commands) -> None:
    actions = group(subparsers, "result", help="work with stored results")
    decrypt = command(
        actions,
        "decrypt",
        _decrypt_result,
        help="decrypt a stored result and check its HMAC",
        description=f"Decrypt a stored result blob. The storage key is {_STORAGE.order}. "
        "The HMAC is checked when --hmac "
        "or --event gives the expected value.",
    )
    decrypt.add_argument("file", help="the stored blob (base64 text), or - for stdin")
    _STORAGE.add_option(decrypt, "storage key")
    expected = decrypt.add_mutually_exclusive_group()
    expected.add_argument("--hmac", metavar="HEX", help="expected result HMAC (result.hmac)")
    expected.add_argument(
        "--event", metavar="FILE", help="job.completed event (message or body) with result.hmac"
    )
    _EXTERNAL_HMAC.add_option(decrypt, "external HMAC key")
    decrypt.add_argument("--out", metavar="FILE", help="write the plaintext here (default: stdout)")


# --- wiring -----------------------------------------------------------------------------------


def add_tool_commands(subparsers: Commands) -> None:
    """Add ``keys``, ``event`` and ``result``; each leaf sets ``func(args) -> exit code``."""
    _add_keys(subparsers)
    _add_event(subparsers)
    _add_result(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fetcher")
    add_tool_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
