"""``fetcher keys audit-public``: the checkpoint signer's public key, as scripts want it."""

from __future__ import annotations

import base64
import io
import sys

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from adapters.crypto.keys import derive
from entrypoints.cli.tools import main

MASTER = bytes(range(32))
MASTER_B64 = base64.b64encode(MASTER).decode()
OLD_B64 = base64.b64encode(bytes(range(1, 33))).decode()


def _public(seed: bytes) -> str:
    raw = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    return base64.b64encode(raw.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


EXPECTED = _public(derive(MASTER, "fetcher-audit-signing-v1"))


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (
        "APP_ENC_KEY",
        "APP_ENC_KEY_VERSION",
        "APP_ENC_KEYS_PREVIOUS",
        "FETCHER_AUDIT_SIGNING_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdin", FakeTty(""))


def test_raw_prints_the_key_derived_with_the_audit_context(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    assert main(["keys", "audit-public", "--raw"]) == 0
    assert capsys.readouterr().out == f"{EXPECTED}\n"


def test_the_label_names_the_key_id(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    monkeypatch.setenv("APP_ENC_KEY_VERSION", "7")
    assert main(["keys", "audit-public"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Audit Public Key (base64, key id 7.") and out.endswith(f"{EXPECTED}\n")


def test_all_lists_every_key_version(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    monkeypatch.setenv("APP_ENC_KEY_VERSION", "2")
    monkeypatch.setenv("APP_ENC_KEYS_PREVIOUS", f"1:{OLD_B64}")
    assert main(["keys", "audit-public", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0].split(".")[0] for line in lines] == ["2", "1"]
    assert lines[0].split()[1] == EXPECTED


def test_a_configured_signing_key_wins(monkeypatch, capsys):
    seed = bytes(range(100, 132))
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    monkeypatch.setenv("FETCHER_AUDIT_SIGNING_KEY", base64.b64encode(seed).decode())
    assert main(["keys", "audit-public", "--raw"]) == 0
    assert capsys.readouterr().out == f"{_public(seed)}\n"


def test_without_a_master_key_it_fails_with_one_line(capsys):
    assert main(["keys", "audit-public"]) == 1
    assert capsys.readouterr().err.startswith("Error: ")
