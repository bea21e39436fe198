"""TLS for real: a private PostgreSQL 15 with ``ssl=on``, a CA and certificates made here.

The server listens on its own port on 127.0.0.1 with its own data folder; it is started once
for the module (``initdb`` runs as ``postgres``, it refuses root) and stopped by its PID.
Host connections use SCRAM passwords, except ``certuser``, which must present a client
certificate signed by the test CA.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import os
import pwd
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import asyncpg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from adapters.crypto.keys import KeyRing
from adapters.crypto.sealing import open_result
from domain.tenant import SINGLE_TENANT
from tests.integration.connection_api import MASTER_KEY, Api, connections_api

pytestmark = pytest.mark.integration

PASSWORD = "p @:/?#&=+%' w"
BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": "payments"}
RENAMED_HOST = "db.test.invalid"


@dataclass(frozen=True)
class Pem:
    cert: str
    key: str


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer or (name, key)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class Pki:
    ca: str
    wrong_ca: str
    server: Pem
    client: Pem
    renamed: Pem
    """Signed by the test CA too, but for ``db.test.invalid`` only."""


def make_pki() -> Pki:
    ca_key, wrong_key, server_key, client_key, renamed_key = (_key() for _ in range(5))
    ca = _certificate("fetcher test CA", ca_key, None, ca=True)
    wrong = _certificate("some other CA", wrong_key, None, ca=True)
    server = _certificate(
        "localhost",
        server_key,
        (ca.subject, ca_key),
        names=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client = _certificate("certuser", client_key, (ca.subject, ca_key))
    renamed = _certificate(
        RENAMED_HOST, renamed_key, (ca.subject, ca_key), names=[x509.DNSName(RENAMED_HOST)]
    )
    return Pki(
        ca=_pem(ca),
        wrong_ca=_pem(wrong),
        server=Pem(_pem(server), _pem_key(server_key)),
        client=Pem(_pem(client), _pem_key(client_key)),
        renamed=Pem(_pem(renamed), _pem_key(renamed_key)),
    )


def postgres_bindir() -> Path:
    """Where ``initdb`` and ``postgres`` are: ``pg_config --bindir``, else the ``PATH``."""
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        bindir = Path(found.stdout.strip())
        if found.returncode == 0 and (bindir / "initdb").exists():
            return bindir
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.fail("PostgreSQL's initdb is neither in `pg_config --bindir` nor on PATH")
    return Path(initdb).resolve().parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_postgres(*args: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args]


@dataclass(frozen=True)
class TlsServer:
    port: int
    socket_dir: Path
    data: Path
    pki: Pki


def _write(path: Path, text: str, owner: pwd.struct_passwd, mode: int) -> None:
    path.write_text(text)
    os.chown(path, owner.pw_uid, owner.pw_gid)
    path.chmod(mode)


def _wait_ready(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"PostgreSQL did not start:\n{log.read_text()}", pytrace=False)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"PostgreSQL did not listen in 30 s:\n{log.read_text()}", pytrace=False)


def _stop(data: Path, process: subprocess.Popen[bytes]) -> None:
    pid_file = data / "postmaster.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text().splitlines()[0])
        os.kill(pid, signal.SIGINT)  # fast shutdown of the postmaster we started
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    postgres = pwd.getpwnam("postgres")
    bindir = postgres_bindir()
    # Not under pytest's temporary folder: its parents are private to root.
    root = Path(tempfile.mkdtemp(prefix="fetcher-pg-tls-"))
    os.chown(root, postgres.pw_uid, postgres.pw_gid)
    root.chmod(0o755)
    data = root / "data"
    subprocess.run(
        _as_postgres(
            str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
            "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync",
        ),
        check=True,
        capture_output=True,
    )  # fmt: skip
    pki = make_pki()
    _write(data / "server.crt", pki.server.cert, postgres, 0o644)
    _write(data / "server.key", pki.server.key, postgres, 0o600)
    _write(data / "root.crt", pki.ca, postgres, 0o644)
    _write(
        data / "pg_hba.conf",
        "local all all trust\n"
        "hostssl all certuser 127.0.0.1/32 cert\n"
        "host all all 127.0.0.1/32 scram-sha-256\n",
        postgres,
        0o600,
    )
    port = _free_port()
    log = root / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            _as_postgres(
                str(bindir / "postgres"), "-D", str(data), "-p", str(port),
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={root}",
                "-c", "ssl=on", "-c", "ssl_ca_file=root.crt", "-c", "fsync=off",
            ),
            stdout=output,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_ready(port, process, log)
        asyncio.run(_prepare(root, port))
        yield TlsServer(port=port, socket_dir=root, data=data, pki=pki)
    finally:
        _stop(data, process)
        shutil.rmtree(root, ignore_errors=True)


async def _superuser(socket_dir: Path, port: int) -> asyncpg.Connection:
    """A superuser connection over the server's socket, once it accepts them (it listens
    before it has finished starting up)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await asyncpg.connect(host=str(socket_dir), port=port, user="postgres")
        except asyncpg.CannotConnectNowError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _prepare(socket_dir: Path, port: int) -> None:
    admin = await _superuser(socket_dir, port)
    try:
        quoted = PASSWORD.replace("'", "''")
        await admin.execute(f"CREATE ROLE reader LOGIN PASSWORD '{quoted}'")
        await admin.execute("CREATE ROLE certuser LOGIN")
        await admin.execute("CREATE DATABASE shop OWNER reader")
    finally:
        await admin.close()
    shop = await asyncpg.connect(host=str(socket_dir), port=port, user="reader", database="shop")
    try:
        await shop.execute(
            "CREATE TABLE orders (id bigint PRIMARY KEY, total numeric(10,2), note text);"
            "INSERT INTO orders VALUES (1, 9.90, 'first'), (2, 20.00, NULL);"
            "GRANT SELECT ON orders TO certuser;"
        )
    finally:
        await shop.close()


def served_certificate_name(port: int) -> str:
    """The common name of the certificate the server presents now (SSLRequest, then TLS)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack("!II", 8, 80877103))
        if sock.recv(1) != b"S":
            raise AssertionError("the server refused TLS")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with context.wrap_socket(sock) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    names = x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value)


async def _serve_certificate(server: TlsServer, pem: Pem, name: str) -> None:
    """Swaps the server's certificate and key, reloads it, and waits until it presents it."""
    postgres = pwd.getpwnam("postgres")
    _write(server.data / "server.crt", pem.cert, postgres, 0o644)
    _write(server.data / "server.key", pem.key, postgres, 0o600)
    admin = await _superuser(server.socket_dir, server.port)
    try:
        assert await admin.fetchval("SELECT pg_reload_conf()")
    finally:
        await admin.close()
    deadline = time.monotonic() + 10
    while served_certificate_name(server.port) != name:
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not switch to its {name} certificate")
        await asyncio.sleep(0.05)


@pytest.fixture
async def renamed_server(tls_server: TlsServer) -> AsyncIterator[TlsServer]:
    """The same server, presenting a certificate from the same CA for another name."""
    await _serve_certificate(tls_server, tls_server.pki.renamed, RENAMED_HOST)
    try:
        yield tls_server
    finally:
        await _serve_certificate(tls_server, tls_server.pki.server, "localhost")


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with connections_api(None, tmp_path / "connections.sqlite3") as api:
        yield api


async def _register(api: Api, server: TlsServer, name: str, **changes: object) -> dict:
    body = {
        "configName": name,
        "type": "POSTGRESQL",
        "host": "localhost",
        "port": server.port,
        "databaseName": "shop",
        "userName": "reader",
        "password": PASSWORD,
        **changes,
    }
    response = await api.client.post(BASE, json=body, headers=PRODUCT)
    assert response.status_code == 201, response.text
    return response.json()


async def _test(api: Api, created: dict):
    return await api.client.post(f"{BASE}/{created['id']}/test")


async def test_verify_full_with_the_right_ca_and_host(api: Api, tls_server: TlsServer) -> None:
    created = await _register(
        api, tls_server, "tls_full", ssl={"mode": "verify-full", "ca": tls_server.pki.ca}
    )
    response = await _test(api, created)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "success"
    schema = (await api.client.get(f"{BASE}/{created['id']}/schema")).json()
    assert schema["tables"] == [
        {
            "name": "orders",
            "fields": ["id", "note", "total"],
            "columns": [
                {"name": "id", "type": "bigint"},
                {"name": "note", "type": "text"},
                {"name": "total", "type": "numeric"},
            ],
        }
    ]
    by_address = await _register(
        api,
        tls_server,
        "tls_by_ip",
        host="127.0.0.1",
        ssl={"mode": "verify-full", "ca": tls_server.pki.ca},
    )
    assert (await _test(api, by_address)).status_code == 200


async def test_verify_full_with_a_wrong_ca_fails_clearly(api: Api, tls_server: TlsServer) -> None:
    for mode in ("verify-full", "verify-ca"):
        created = await _register(
            api, tls_server, f"wrong_{mode}", ssl={"mode": mode, "ca": tls_server.pki.wrong_ca}
        )
        response = await _test(api, created)
        assert response.status_code == 502, response.text
        body = response.json()
        assert body["code"] == "FET-1041" and body["title"] == "Database Connection Error"
        assert body["message"].endswith("Cause: the server certificate could not be verified.")
        schema = await api.client.get(f"{BASE}/{created['id']}/schema")
        assert schema.status_code == 502 and schema.json()["code"] == "FET-1041"


async def test_verify_full_refuses_a_certificate_for_another_name_that_verify_ca_accepts(
    api: Api, renamed_server: TlsServer
) -> None:
    ca = renamed_server.pki.ca
    for n, host in enumerate(["localhost", "127.0.0.1"]):
        full = await _register(
            api, renamed_server, f"renamed_full_{n}", host=host,
            ssl={"mode": "verify-full", "ca": ca},
        )  # fmt: skip
        response = await _test(api, full)
        assert response.status_code == 502, response.text
        assert response.json()["code"] == "FET-1041"
        assert response.json()["message"].endswith(
            "Cause: the server certificate could not be verified."
        )
        ca_only = await _register(
            api, renamed_server, f"renamed_ca_{n}", host=host,
            ssl={"mode": "verify-ca", "ca": ca},
        )  # fmt: skip
        response = await _test(api, ca_only)
        assert response.status_code == 200, response.text


async def test_require_encrypts_without_a_ca(api: Api, tls_server: TlsServer) -> None:
    created = await _register(api, tls_server, "tls_require", ssl={"mode": "require"})
    assert (await _test(api, created)).status_code == 200


async def test_verify_ca_does_not_check_the_name(api: Api, tls_server: TlsServer) -> None:
    created = await _register(
        api,
        tls_server,
        "tls_ca_only",
        host="127.0.0.1",
        ssl={"mode": "verify-ca", "ca": tls_server.pki.ca},
    )
    assert (await _test(api, created)).status_code == 200


async def test_client_certificate_and_key_are_presented(api: Api, tls_server: TlsServer) -> None:
    pki = tls_server.pki
    without = await _register(
        api,
        tls_server,
        "cert_missing",
        userName="certuser",
        ssl={"mode": "verify-full", "ca": pki.ca},
    )
    assert (await _test(api, without)).status_code == 502
    with_cert = await _register(
        api,
        tls_server,
        "cert_given",
        userName="certuser",
        password="unused",
        ssl={"mode": "verify-full", "ca": pki.ca, "cert": pki.client.cert, "key": pki.client.key},
    )
    response = await _test(api, with_cert)
    assert response.status_code == 200, response.text


async def test_any_password_reaches_the_server_and_a_wrong_one_is_named(
    api: Api, tls_server: TlsServer
) -> None:
    plain = await _register(api, tls_server, "plain_pw")  # no TLS at all
    assert (await _test(api, plain)).status_code == 200
    wrong = await _register(api, tls_server, "wrong_pw", password="not it")
    response = await _test(api, wrong)
    assert response.status_code == 502
    assert response.json()["message"].endswith("Cause: authentication failed.")
    assert "not it" not in response.text and PASSWORD not in response.text


async def test_a_job_extracts_over_verified_tls(api: Api, tls_server: TlsServer) -> None:
    await _register(
        api, tls_server, "tls_job", ssl={"mode": "verify-full", "ca": tls_server.pki.ca}
    )
    validated = await api.client.post(
        f"{BASE}/validate-schema", json={"mappedFields": {"tls_job": {"orders": ["*"]}}}
    )
    assert validated.status_code == 200, validated.text
    job = await api.client.post(
        "/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {"tls_job": {"public.orders": ["id", "total"]}}},
            "metadata": {"source": "Payments"},
        },
    )
    assert job.status_code == 202, job.text
    job_id = UUID(job.json()["jobId"])
    await api.run_job(job_id, tenant=SINGLE_TENANT)
    done = (await api.client.get(f"/v1/fetcher/{job_id}")).json()
    assert done["status"] == "completed", done
    blob = api.storage.objects[f"external-data/{job_id}.json"]
    keys = KeyRing(MASTER_KEY).current
    result = json.loads(open_result(blob, keys.storage, keys.external_hmac, None))
    assert result == {
        "tls_job": {"orders": [{"id": 1, "total": "9.90"}, {"id": 2, "total": "20.00"}]}
    }
