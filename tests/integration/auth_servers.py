"""Small HTTP servers on loopback for the authentication tests: an OpenID provider that serves
its discovery document and key set and issues tokens, and the reference's authorization
service (``POST /v1/authorize``). Each runs in a thread (``http.server``), so async tests and
fetcher processes alike can call it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ALL_PERMISSIONS = (
    "connections:post",
    "connections:get",
    "connections:patch",
    "connections:delete",
    "fetcher:post",
    "fetcher:get",
    "fetcher:history",
)

Route = Callable[[str, dict[str, str], bytes], tuple[int, Any]]


@dataclass(frozen=True)
class Redirect:
    """An answer that sends the client to ``location``."""

    location: str


@dataclass(frozen=True)
class InPieces:
    """An answer whose body is sent in ``pieces`` writes with a pause between them, the way a
    slow network delivers it."""

    body: bytes
    pieces: int = 2
    pause: float = 0.05


class _Server:
    """A threaded HTTP server answering with ``route(method+path, headers, body)``."""

    def __init__(self, route: Route) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                key = f"{self.command} {self.path}"
                server.requests.append((key, headers, body))
                status, payload = route(key, headers, body)
                location = payload.location if isinstance(payload, Redirect) else None
                if isinstance(payload, Redirect):
                    payload = b""
                pieces = payload if isinstance(payload, InPieces) else None
                if pieces is not None:
                    payload = pieces.body
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    if location is not None:
                        self.send_header("Location", location)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    # As an issuer allows a web client's origin (the console's token request).
                    self.send_header("Access-Control-Allow-Origin", "*")
                    self.end_headers()
                    if pieces is None:
                        self.wfile.write(raw)
                    else:
                        step = -(-len(raw) // pieces.pieces)
                        for start in range(0, len(raw), step):
                            self.wfile.write(raw[start : start + step])
                            self.wfile.flush()
                            time.sleep(pieces.pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting

            do_GET = do_POST = _answer

            def do_OPTIONS(self) -> None:
                self.send_response(204)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Methods", "GET, POST")
                self.send_header("Access-Control-Allow-Headers", "Content-Type, Authorization")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def count(self, key: str) -> int:
        return sum(1 for seen, _, _ in self.requests if seen == key)


@dataclass
class SigningKey:
    kid: str
    algorithm: str
    private: Any
    use: str = "sig"

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        exporter = ECAlgorithm if self.algorithm.startswith("ES") else RSAAlgorithm
        jwk: dict[str, Any] = exporter.to_jwk(public, as_dict=True)
        return {**jwk, "kid": self.kid, "use": self.use, "alg": self.algorithm}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            Encoding.PEM, PublicFormat.SubjectPublicKeyInfo
        )


def new_key(algorithm: str = "RS256", kid: str | None = None) -> SigningKey:
    private: Any
    if algorithm.startswith("ES"):
        private = ec.generate_private_key(ec.SECP256R1())
    else:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return SigningKey(kid or uuid.uuid4().hex[:12], algorithm, private)


@dataclass
class LocalIdentityProvider:
    """A Keycloak-like issuer at ``<base>/realms/fetcher``: discovery document, key set, and
    tokens signed with its current key."""

    audience: str = "fetcher-api"
    keys: list[SigningKey] = field(default_factory=lambda: [new_key(kid="first")])
    advertised_issuer: str | None = None
    """The ``issuer`` its discovery document names, when not its own."""
    key_set_in_pieces: bool = False
    """Send the key set in several writes with pauses, as a slow network delivers it."""
    sign_in_permissions: tuple[str, ...] = ALL_PERMISSIONS
    """What a token issued by signing in (the authorisation code flow) grants."""
    client_id: str = "fetcher-console"
    """The one public client that may sign in."""
    server: _Server = field(init=False)
    _codes: dict[str, tuple[str, str]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.server = _Server(self._route)

    @property
    def issuer(self) -> str:
        return f"{self.server.base_url}/realms/fetcher"

    @property
    def discovery_path(self) -> str:
        return "/realms/fetcher/.well-known/openid-configuration"

    @property
    def jwks_path(self) -> str:
        return "/realms/fetcher/protocol/openid-connect/certs"

    @property
    def jwks_url(self) -> str:
        return self.server.base_url + self.jwks_path

    @property
    def authorization_path(self) -> str:
        return "/realms/fetcher/protocol/openid-connect/auth"

    @property
    def token_path(self) -> str:
        return "/realms/fetcher/protocol/openid-connect/token"

    def _route(self, key: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        if key == f"GET {self.discovery_path}":
            issuer = self.advertised_issuer or self.issuer
            return 200, {
                "issuer": issuer,
                "jwks_uri": self.jwks_url,
                "authorization_endpoint": self.server.base_url + self.authorization_path,
                "token_endpoint": self.server.base_url + self.token_path,
                "code_challenge_methods_supported": ["S256"],
            }
        if key.startswith(f"GET {self.authorization_path}?"):
            return self._authorize(dict(parse_qsl(key.partition("?")[2])))
        if key == f"POST {self.token_path}":
            return self._exchange(dict(parse_qsl(body.decode())))
        if key == f"GET {self.jwks_path}":
            key_set = {"keys": [k.jwk() for k in self.keys]}
            if self.key_set_in_pieces:
                return 200, InPieces(json.dumps(key_set).encode(), pieces=4)
            return 200, key_set
        return 404, {"error": "not found"}

    def _authorize(self, query: dict[str, str]) -> tuple[int, Any]:
        """Signs the user in at once (no login form) and sends the browser back with a code,
        for a public client using PKCE (S256) only."""
        wanted = ("response_type", "client_id", "redirect_uri", "state", "code_challenge")
        if any(not query.get(name) for name in wanted) or query["response_type"] != "code":
            return 400, {"error": "invalid_request"}
        if query["client_id"] != self.client_id or query.get("code_challenge_method") != "S256":
            return 400, {"error": "unauthorized_client"}
        code = uuid.uuid4().hex
        self._codes[code] = (query["code_challenge"], query["redirect_uri"])
        back = urlencode({"code": code, "state": query["state"]})
        return 302, Redirect(f"{query['redirect_uri']}?{back}")

    def _exchange(self, form: dict[str, str]) -> tuple[int, Any]:
        """A code for a token, once, with the verifier whose SHA-256 is the challenge."""
        challenge, redirect_uri = self._codes.pop(form.get("code", ""), ("", ""))
        verifier = form.get("code_verifier", "").encode()
        expected = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if (
            not challenge
            or form.get("grant_type") != "authorization_code"
            or form.get("client_id") != self.client_id
            or form.get("redirect_uri") != redirect_uri
            or not hmac.compare_digest(expected.decode(), challenge)
        ):
            return 400, {"error": "invalid_grant"}
        token = self.token(self.sign_in_permissions)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 300}

    @property
    def current(self) -> SigningKey:
        return self.keys[-1]

    def rotate(self, algorithm: str = "RS256", *, drop_old: bool = False) -> SigningKey:
        key = new_key(algorithm)
        self.keys = [key] if drop_old else [*self.keys, key]
        return key

    def claims(self, permissions: tuple[str, ...] | list[str] = ALL_PERMISSIONS) -> dict:
        now = int(time.time())
        return {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": "user-1",
            "iat": now,
            "exp": now + 300,
            "scope": " ".join(permissions),
            "tenantId": "tenant-a",
        }

    def token(
        self,
        permissions: tuple[str, ...] | list[str] = ALL_PERMISSIONS,
        *,
        key: SigningKey | None = None,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        key = key or self.current
        payload = {**self.claims(permissions), **claims}
        payload = {name: value for name, value in payload.items() if value is not None}
        return jwt.encode(
            payload,
            key.private,
            algorithm=key.algorithm,
            headers={"kid": key.kid, **(headers or {})},
        )

    def start(self) -> LocalIdentityProvider:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()


def unsigned_token(claims: dict[str, Any]) -> str:
    """A token with ``alg: none`` and no signature."""
    return jwt.encode(claims, None, algorithm="none")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def hmac_token(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """An HS256 token signed with any bytes, a public key's PEM included (the algorithm
    confusion attack, which PyJWT refuses to produce)."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    payload = _b64(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


@dataclass
class AuthorizeServer:
    """The reference's authorization service: ``decide(request body, Authorization header)``
    returns the status and body it answers."""

    decide: Callable[[dict[str, Any], str], tuple[int, Any]] = field(
        default=lambda body, authorization: (200, {"authorized": True})
    )
    server: _Server = field(init=False)

    def __post_init__(self) -> None:
        self.server = _Server(self._route)

    def _route(self, key: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        if key != "POST /v1/authorize":
            return 404, {"error": "not found"}
        return self.decide(json.loads(body), headers.get("authorization", ""))

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def start(self) -> AuthorizeServer:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    @property
    def asked(self) -> list[dict[str, Any]]:
        return [json.loads(body) for key, _, body in self.server.requests]

    @property
    def authorizations(self) -> list[str]:
        return [headers.get("authorization", "") for _, headers, _ in self.server.requests]


@contextmanager
def running(server: Any) -> Iterator[Any]:
    server.start()
    try:
        yield server
    finally:
        server.stop()
