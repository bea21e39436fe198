import base64
import hashlib
import hmac
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.crypto.keys import derive
from adapters.crypto.signing import HmacMessageSigner
from entrypoints.cli.tools import main

REPO = Path(__file__).resolve().parents[4]
MASTER = bytes(range(32))
MASTER_B64 = base64.b64encode(MASTER).decode()
OLD_MASTER = bytes(range(1, 33))
OLD_MASTER_B64 = base64.b64encode(OLD_MASTER).decode()
EXTERNAL = derive(MASTER, "fetcher-external-hmac-v1")
STORAGE = derive(MASTER, "fetcher-storage-encryption-v1")
TOOL_ENV = (
    "APP_ENC_KEY",
    "APP_ENC_KEY_VERSION",
    "APP_ENC_KEYS_PREVIOUS",
    "FETCHER_EXTERNAL_HMAC_KEY",
    "FETCHER_STORAGE_KEY",
)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in TOOL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdin", FakeTty(""))


def stdin_text(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def stdin_bytes(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


# --- keys ---------------------------------------------------------------------------------------


def test_keys_external_hmac_from_env(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", f"  {MASTER_B64}\n")
    assert main(["keys", "external-hmac"]) == 0
    out, err = capsys.readouterr()
    assert out == f"External HMAC Key (hex): {EXTERNAL.hex()}\n"
    assert err == ""


def test_keys_storage_from_env(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    assert main(["keys", "storage"]) == 0
    assert capsys.readouterr().out == f"Storage Encryption Key (hex): {STORAGE.hex()}\n"


@pytest.mark.parametrize(("kind", "key"), [("external-hmac", EXTERNAL), ("storage", STORAGE)])
def test_keys_raw_prints_the_bare_key_for_scripts(monkeypatch, capsys, kind, key):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    assert main(["keys", kind, "--raw"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{key.hex()}\n"
    assert err == ""


def test_keys_reads_the_first_line_of_piped_stdin(monkeypatch, capsys):
    stdin_text(monkeypatch, f"  {MASTER_B64}  \nignored second line\n")
    assert main(["keys", "external-hmac"]) == 0
    assert capsys.readouterr().out == f"External HMAC Key (hex): {EXTERNAL.hex()}\n"


def test_keys_env_wins_over_stdin_and_flag(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    stdin_text(monkeypatch, OLD_MASTER_B64 + "\n")
    assert main(["keys", "external-hmac", "--key", OLD_MASTER_B64]) == 0
    assert capsys.readouterr().out == f"External HMAC Key (hex): {EXTERNAL.hex()}\n"


def test_keys_stdin_wins_over_flag(monkeypatch, capsys):
    stdin_text(monkeypatch, MASTER_B64 + "\n")
    assert main(["keys", "external-hmac", "--key", OLD_MASTER_B64]) == 0
    assert capsys.readouterr().out == f"External HMAC Key (hex): {EXTERNAL.hex()}\n"


def test_keys_flag_is_used_when_stdin_is_a_terminal(capsys):
    assert main(["keys", "storage", "-key", MASTER_B64]) == 0
    assert capsys.readouterr().out == f"Storage Encryption Key (hex): {STORAGE.hex()}\n"


def test_keys_without_a_key_prints_the_error_and_usage(capsys):
    assert main(["keys", "external-hmac"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0] == "Error: No master key provided"
    assert "usage: fetcher keys external-hmac" in err


def test_keys_with_empty_piped_stdin_has_no_key(monkeypatch, capsys):
    stdin_text(monkeypatch, "\n")
    assert main(["keys", "storage"]) == 1
    assert capsys.readouterr().err.startswith("Error: No master key provided\n")


def test_keys_with_invalid_base64(monkeypatch, capsys):
    monkeypatch.setenv("APP_ENC_KEY", "abc!")
    assert main(["keys", "external-hmac"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0] == (
        "Error: invalid master key (base64): illegal base64 data at input byte 3"
    )


def test_keys_with_a_short_key(monkeypatch, capsys):
    short = base64.b64encode(b"sixteen-byte-key").decode()
    stdin_text(monkeypatch, short + "\n")
    assert main(["keys", "storage"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0] == "Error: master key too short: got 16 bytes, minimum 32 required"
    assert short not in err


def run_tool(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if k not in TOOL_ENV}
    return subprocess.run(
        [sys.executable, "-m", "entrypoints.cli.tools", *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env={**clean, **(env or {})},
        timeout=60,
        check=False,
    )


def test_keys_in_a_real_process_reads_piped_stdin():
    done = run_tool("keys", "external-hmac", stdin=f"{MASTER_B64}\n".encode())
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f"External HMAC Key (hex): {EXTERNAL.hex()}\n"
    assert done.stderr == b""


def test_keys_in_a_real_process_without_key_fails():
    done = run_tool("keys", "storage")
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr.decode().startswith("Error: No master key provided\n")


# --- event verify -------------------------------------------------------------------------------

BODY = (
    '{"jobId":"0190b8a0-0000-7000-8000-000000000001","metadata":{"who":"ação"},"status":"failed"}'
)


def event_message(key: bytes = EXTERNAL, *, timestamp: int | None = None) -> dict:
    headers: dict[str, object] = {
        "ce-id": "fetcher.job.failed.0190b8a0-0000-7000-8000-000000000001",
        "X-Tenant-ID": "single-tenant",
        "x-retry-count": 0,
    }
    headers.update(
        HmacMessageSigner([key]).sign(
            tenant="single-tenant",
            exchange="fetcher.job.events",
            routing_key="job.failed",
            body=BODY.encode(),
            timestamp=int(time.time()) if timestamp is None else timestamp,
        )
    )
    return {
        "exchange": "fetcher.job.events",
        "routingKey": "job.failed",
        "headers": headers,
        "body": BODY,
    }


def write_json(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_event_verify_with_key_derived_from_app_enc_key(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    assert main(["event", "verify", write_json(tmp_path / "m.json", event_message())]) == 0
    assert capsys.readouterr() == ("signature valid\n", "")


def test_event_verify_with_hmac_key_flag_and_env(monkeypatch, capsys, tmp_path):
    file = write_json(tmp_path / "m.json", event_message())
    assert main(["event", "verify", file, "--hmac-key", EXTERNAL.hex()]) == 0
    monkeypatch.setenv("FETCHER_EXTERNAL_HMAC_KEY", EXTERNAL.hex().upper())
    assert main(["event", "verify", file]) == 0
    out, err = capsys.readouterr()
    assert out == "signature valid\nsignature valid\n"
    assert EXTERNAL.hex() not in err


def test_event_verify_reads_stdin(monkeypatch, capsys):
    monkeypatch.setenv("FETCHER_EXTERNAL_HMAC_KEY", EXTERNAL.hex())
    stdin_text(monkeypatch, json.dumps(event_message(), ensure_ascii=False) + "\n")
    assert main(["event", "verify"]) == 0
    assert capsys.readouterr().out == "signature valid\n"


def test_event_verify_reads_a_text_only_stdin(monkeypatch, capsys):
    monkeypatch.setenv("FETCHER_EXTERNAL_HMAC_KEY", EXTERNAL.hex())
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(event_message())))
    assert main(["event", "verify", "-"]) == 0
    assert capsys.readouterr().out == "signature valid\n"


def test_event_verify_with_an_older_ring_key(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", OLD_MASTER_B64)
    monkeypatch.setenv("APP_ENC_KEY_VERSION", "2")
    monkeypatch.setenv("APP_ENC_KEYS_PREVIOUS", f"1:{MASTER_B64}")
    assert main(["event", "verify", write_json(tmp_path / "m.json", event_message())]) == 0
    assert capsys.readouterr().out == "signature valid\n"


@pytest.mark.parametrize(
    "change",
    [
        {"body": BODY.replace("failed", "completed")},
        {"routingKey": "job.completed"},
        {"exchange": "other"},
    ],
)
def test_event_verify_rejects_a_tampered_message(capsys, tmp_path, change):
    file = write_json(tmp_path / "m.json", {**event_message(), **change})
    assert main(["event", "verify", file, "--hmac-key", EXTERNAL.hex()]) == 1
    assert capsys.readouterr() == ("", "signature invalid: signature mismatch\n")


def test_event_verify_rejects_another_tenant(capsys, tmp_path):
    message = event_message()
    message["headers"]["X-Tenant-ID"] = "acme"
    file = write_json(tmp_path / "m.json", message)
    assert main(["event", "verify", file, "--hmac-key", EXTERNAL.hex()]) == 1
    assert capsys.readouterr().err == "signature invalid: signature mismatch\n"


def test_event_verify_rejects_a_wrong_key(capsys, tmp_path):
    file = write_json(tmp_path / "m.json", event_message())
    assert main(["event", "verify", file, "--hmac-key", "ab" * 32]) == 1
    assert capsys.readouterr().err == "signature invalid: signature mismatch\n"


def test_event_verify_checks_age_only_with_max_age(capsys, tmp_path):
    old = write_json(tmp_path / "m.json", event_message(timestamp=int(time.time()) - 3600))
    assert main(["event", "verify", old, "--hmac-key", EXTERNAL.hex()]) == 0
    assert main(["event", "verify", old, "--hmac-key", EXTERNAL.hex(), "--max-age", "300"]) == 1
    out, err = capsys.readouterr()
    assert out == "signature valid\n"
    assert err == "signature invalid: signature has expired\n"


def test_event_verify_rejects_future_timestamps(capsys, tmp_path):
    future = event_message(timestamp=int(time.time()) + 600)
    assert (
        main(
            [
                "event",
                "verify",
                write_json(tmp_path / "m.json", future),
                "--hmac-key",
                EXTERNAL.hex(),
            ]
        )
        == 1
    )
    assert capsys.readouterr().err == "signature invalid: signature timestamp is in the future\n"


def test_event_verify_reports_missing_headers(capsys, tmp_path):
    message = event_message()
    del message["headers"]["x-message-signature"]
    file = write_json(tmp_path / "m.json", message)
    assert main(["event", "verify", file, "--hmac-key", EXTERNAL.hex()]) == 1
    assert capsys.readouterr().err == "signature invalid: missing signature header\n"


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("not json", "Error: message is not valid JSON\n"),
        ('{"a":1}\n{"b":2}\n', "Error: message must hold one JSON message, not 2 lines\n"),
        ("[]", "Error: message must be a JSON object\n"),
        (
            '{"exchange":"e","routingKey":"r","headers":{},"body":{"jobId":"x"}}',
            "Error: message: field 'body' must be a string\n",
        ),
    ],
)
def test_event_verify_reports_bad_input(capsys, tmp_path, content, error):
    file = tmp_path / "m.json"
    file.write_text(content)
    assert main(["event", "verify", str(file), "--hmac-key", EXTERNAL.hex()]) == 1
    assert capsys.readouterr() == ("", error)


def test_event_verify_without_any_key(capsys, tmp_path):
    file = write_json(tmp_path / "m.json", event_message())
    assert main(["event", "verify", file]) == 1
    assert capsys.readouterr().err == (
        "Error: no HMAC key: pass --hmac-key, or set FETCHER_EXTERNAL_HMAC_KEY or APP_ENC_KEY\n"
    )


def test_event_verify_with_a_malformed_key_does_not_echo_it(capsys, tmp_path):
    file = write_json(tmp_path / "m.json", event_message())
    assert main(["event", "verify", file, "--hmac-key", "zz-secret-zz"]) == 1
    err = capsys.readouterr().err
    assert err == "Error: --hmac-key must be 64 hexadecimal characters (a 32-byte key)\n"


def test_event_verify_missing_file(capsys, tmp_path):
    assert main(["event", "verify", str(tmp_path / "none.json"), "--hmac-key", "00" * 32]) == 1
    assert capsys.readouterr().err.startswith("Error: cannot read ")


def test_event_verify_in_a_real_process(tmp_path):
    file = write_json(tmp_path / "m.json", event_message())
    done = run_tool("event", "verify", file, env={"APP_ENC_KEY": MASTER_B64})
    assert (done.returncode, done.stdout, done.stderr) == (0, b"signature valid\n", b"")


# --- result decrypt -----------------------------------------------------------------------------

PLAINTEXT = '[{"id":1,"email":"zoë@example.com"}]'.encode()
PLAIN_HMAC = hmac.new(EXTERNAL, PLAINTEXT, hashlib.sha256).hexdigest()


def blob_file(tmp_path: Path, plaintext: bytes = PLAINTEXT, key: bytes = STORAGE) -> str:
    nonce = os.urandom(12)
    path = tmp_path / "result.json"
    path.write_bytes(base64.b64encode(nonce + AESGCM(key).encrypt(nonce, plaintext, None)))
    return str(path)


def completed_body(digest: str = PLAIN_HMAC) -> dict:
    return {
        "jobId": "0190b8a0-0000-7000-8000-000000000001",
        "metadata": {},
        "status": "completed",
        "result": {"path": "external-data/x.json", "hmac": digest},
    }


def test_result_decrypt_with_derived_keys_and_expected_hmac(monkeypatch, capsysbinary, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    assert main(["result", "decrypt", blob_file(tmp_path), "--hmac", PLAIN_HMAC]) == 0
    out, err = capsysbinary.readouterr()
    assert out == PLAINTEXT
    assert err == f"decrypted {len(PLAINTEXT)} bytes; HMAC verified\n".encode()


def test_result_decrypt_with_explicit_keys_to_a_file(capsysbinary, tmp_path):
    target = tmp_path / "plain.json"
    code = main(
        [
            "result",
            "decrypt",
            blob_file(tmp_path),
            "--storage-key",
            STORAGE.hex(),
            "--hmac-key",
            EXTERNAL.hex(),
            "--hmac",
            PLAIN_HMAC.upper(),
            "--out",
            str(target),
        ]
    )
    assert code == 0
    assert target.read_bytes() == PLAINTEXT
    assert capsysbinary.readouterr().out == b""


def test_result_decrypt_with_env_keys_from_stdin_without_hmac(monkeypatch, capsysbinary, tmp_path):
    monkeypatch.setenv("FETCHER_STORAGE_KEY", STORAGE.hex())
    stdin_bytes(monkeypatch, Path(blob_file(tmp_path)).read_bytes() + b"\n")
    assert main(["result", "decrypt", "-"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == PLAINTEXT
    assert err == f"decrypted {len(PLAINTEXT)} bytes; HMAC not checked\n".encode()


@pytest.mark.parametrize("as_message", [True, False])
def test_result_decrypt_takes_the_hmac_from_an_event(
    monkeypatch, capsysbinary, tmp_path, as_message
):
    monkeypatch.setenv("FETCHER_STORAGE_KEY", STORAGE.hex())
    monkeypatch.setenv("FETCHER_EXTERNAL_HMAC_KEY", EXTERNAL.hex())
    body = completed_body()
    doc = (
        {"exchange": "e", "routingKey": "job.completed", "headers": {}, "body": json.dumps(body)}
        if as_message
        else body
    )
    event = write_json(tmp_path / "event.json", doc)
    assert main(["result", "decrypt", blob_file(tmp_path), "--event", event]) == 0
    assert capsysbinary.readouterr().out == PLAINTEXT


def test_result_decrypt_detects_an_hmac_mismatch(monkeypatch, capsysbinary, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    event = write_json(tmp_path / "event.json", completed_body("0" * 64))
    assert main(["result", "decrypt", blob_file(tmp_path), "--event", event]) == 1
    out, err = capsysbinary.readouterr()
    assert out == b""
    assert err == (
        b"Error: result HMAC mismatch: the decrypted result does not match the expected HMAC\n"
    )


def test_result_decrypt_detects_a_tampered_blob(monkeypatch, capsysbinary, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    path = Path(blob_file(tmp_path))
    raw = bytearray(base64.b64decode(path.read_bytes()))
    raw[15] ^= 0x04
    path.write_bytes(base64.b64encode(bytes(raw)))
    assert main(["result", "decrypt", str(path), "--hmac", PLAIN_HMAC]) == 1
    out, err = capsysbinary.readouterr()
    assert out == b""
    assert err == (
        b"Error: result could not be decrypted: authentication failed "
        b"(wrong storage key, or the blob was altered)\n"
    )


def test_result_decrypt_tries_previous_ring_versions(monkeypatch, capsysbinary, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", OLD_MASTER_B64)
    monkeypatch.setenv("APP_ENC_KEY_VERSION", "2")
    monkeypatch.setenv("APP_ENC_KEYS_PREVIOUS", f"1:{MASTER_B64}")
    assert main(["result", "decrypt", blob_file(tmp_path), "--hmac", PLAIN_HMAC]) == 0
    assert capsysbinary.readouterr().out == PLAINTEXT


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            [],
            b"Error: no storage key: pass --storage-key, "
            b"or set FETCHER_STORAGE_KEY or APP_ENC_KEY\n",
        ),
        (
            ["--storage-key", "00" * 32, "--hmac", "xyz"],
            b"Error: --hmac must be 64 hexadecimal characters\n",
        ),
        (
            ["--storage-key", "00" * 32, "--hmac", "0" * 64],
            b"Error: no HMAC key: pass --hmac-key, "
            b"or set FETCHER_EXTERNAL_HMAC_KEY or APP_ENC_KEY\n",
        ),
        (
            ["--storage-key", "0" * 10],
            b"Error: --storage-key must be 64 hexadecimal characters (a 32-byte key)\n",
        ),
    ],
)
def test_result_decrypt_reports_missing_or_bad_keys(capsysbinary, tmp_path, args, error):
    assert main(["result", "decrypt", blob_file(tmp_path), *args]) == 1
    assert capsysbinary.readouterr() == (b"", error)


def test_result_decrypt_with_a_failed_event(capsysbinary, tmp_path):
    failed = {"jobId": "x", "metadata": {"error": {"message": "boom"}}, "status": "failed"}
    event = write_json(tmp_path / "event.json", failed)
    code = main(
        ["result", "decrypt", blob_file(tmp_path), "--event", event, "--storage-key", STORAGE.hex()]
    )
    assert code == 1
    assert capsysbinary.readouterr().err == (
        b"Error: the event has no result.hmac (only job.completed events carry one)\n"
    )


def test_result_decrypt_with_an_invalid_blob(capsysbinary, tmp_path):
    path = tmp_path / "blob"
    path.write_text("definitely not base64!")
    assert main(["result", "decrypt", str(path), "--storage-key", STORAGE.hex()]) == 1
    assert capsysbinary.readouterr().err == b"Error: result blob is not valid base64\n"


def test_result_decrypt_in_a_real_process(tmp_path):
    done = run_tool(
        "result",
        "decrypt",
        blob_file(tmp_path),
        "--hmac",
        PLAIN_HMAC,
        env={"APP_ENC_KEY": MASTER_B64},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == PLAINTEXT


def test_tools_print_no_master_key_material(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("APP_ENC_KEY", MASTER_B64)
    file = write_json(tmp_path / "m.json", {**event_message(), "body": "{}"})
    main(["event", "verify", file])
    out, err = capsys.readouterr()
    for secret in (MASTER_B64, EXTERNAL.hex(), STORAGE.hex()):
        assert secret not in out + err
