"""``fetcher check``: what a role needs, tried before it starts, one line per item.

Each item reads the settings the role reads and reaches the dependency the way the role
would: the master key decodes, the database answers, the broker answers and has the
topology, the result bucket exists and takes a write, the token issuer answers. A line
says ``ok`` and where, or ``FAIL`` and what to do; no line holds a secret (URLs are shown
without their password). The exit code is 0 when nothing failed, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

# The drivers each check reaches a dependency with are imported by that check: `fetcher`'s
# other commands (an offline audit check among them) load none of them.
from adapters.crypto.keys import InvalidMasterKey, KeyRing
from application.errors import PortError, StorageError, StorageRejected
from application.readiness import sanitize
from domain.errors import Unavailable
from entrypoints.cli.commands import Commands, command
from entrypoints.settings import Settings, SettingsError

TIMEOUT_SECONDS = 10.0
"""How long one item may take."""
ROLES = ("api", "worker", "relay")
ITEMS = {
    "api": ("key", "database", "broker", "topology", "auth"),
    "worker": ("key", "database", "broker", "topology", "storage"),
    "relay": ("key", "database", "broker", "topology", "witness"),
}
OK, FAIL, SKIP = "ok", "FAIL", "skip"


@dataclass(frozen=True, slots=True)
class Finding:
    status: str
    item: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.item:<9} {self.detail}"


def _ok(item: str, detail: str) -> Finding:
    return Finding(OK, item, detail)


def _fail(item: str, detail: str) -> Finding:
    return Finding(FAIL, item, detail)


def _cause(error: BaseException) -> str:
    """The innermost cause's first line, without secrets or addresses."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = (str(error).strip().splitlines() or [""])[0]
    return sanitize(text) or type(error).__name__


def shown_url(url: str) -> str:
    """``url`` without its password (the user stays: it helps to see who logs in)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    user = f"{unquote(parts.username)}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def vhost_of(url: str) -> str:
    path = urlsplit(url).path
    return unquote(path[1:]) if len(path) > 1 else "/"


async def _reached(
    item: str, shown: str, reaching: Awaitable[None], fails: type[Exception], rest: str
) -> Finding:
    """``item`` at ``shown``: ok when ``reaching`` completes; when it fails with ``fails``, the
    cause and what to check (the host, port, user, password and ``rest``)."""
    try:
        await reaching
    except fails as error:
        return _fail(
            item, f"{shown}: {_cause(error)}: check the host, port, user, password and {rest}"
        )
    return _ok(item, shown)


async def check_key(settings: Settings, roles: Collection[str]) -> Finding:
    keys = settings.keys
    if keys.master_key is None:
        return _fail(
            "key",
            "APP_ENC_KEY is not set: generate one (`openssl rand -base64 32`) and give the "
            "same key to every role",
        )
    try:
        KeyRing(keys.master_key, keys.version, keys.previous or None)
    except InvalidMasterKey as error:
        return _fail(
            "key",
            f"APP_ENC_KEY is invalid ({error}): it must be base64 of at least 32 bytes, "
            "the same on every role",
        )
    return _ok("key", f"APP_ENC_KEY decodes (key version {keys.version})")


async def check_database(settings: Settings, roles: Collection[str]) -> Finding:
    database = settings.database
    if not database.configured:
        return _fail(
            "database",
            "FETCHER_DATABASE_URL is not set: every role must use the same PostgreSQL "
            "database, e.g. postgresql://fetcher:PASSWORD@db.internal:5432/fetcher",
        )
    address = database.postgres
    if address is None:
        folder = database.event_store_file.parent
        if not folder.is_dir():
            return _fail("database", f"sqlite folder {folder} does not exist: create it")
        return _ok("database", f"sqlite:///{database.event_store_file} (one machine only)")
    from adapters.common.postgres import reach

    host = f"[{address.host}]" if ":" in address.host else address.host
    shown = f"postgresql://{address.user}@{host}:{address.port}/{address.database}"
    return await _reached(
        "database",
        shown,
        reach(address, timeout=TIMEOUT_SECONDS / 2),
        Unavailable,
        "database of FETCHER_DATABASE_URL",
    )


async def check_broker(settings: Settings, roles: Collection[str]) -> Finding:
    url = settings.broker.url
    if url is None:
        return _fail(
            "broker",
            "RABBITMQ_URL is not set: e.g. amqp://fetcher:PASSWORD@rabbitmq.internal:5672/",
        )
    from adapters.messaging.rabbitmq_probe import reach_broker

    return await _reached(
        "broker",
        shown_url(url),
        reach_broker(url, timeout=TIMEOUT_SECONDS / 2),
        PortError,
        "virtual host of RABBITMQ_URL",
    )


async def check_topology(settings: Settings, roles: Collection[str]) -> Finding:
    broker = settings.broker
    if broker.url is None:
        return Finding(SKIP, "topology", "no broker (RABBITMQ_URL is not set)")
    from entrypoints.composition.infrastructure import broker_topology

    topology = broker_topology(settings)
    vhost = vhost_of(broker.url)
    try:
        await topology.apply(broker.url, passive=True, operation_timeout=TIMEOUT_SECONDS / 2)
    except PortError as error:
        if "does not exist" not in str(error):
            if error.__cause__ is not None and "connect" in str(error):
                return Finding(SKIP, "topology", "the broker cannot be reached (see broker)")
            return _fail("topology", f"{error}: {_cause(error)}")
        if broker.declares_topology(all_roles=False):
            return _ok(
                "topology",
                f"{error} yet on vhost '{vhost}': declared at start "
                "(FETCHER_BROKER_DECLARE_TOPOLOGY=true)",
            )
        return _fail(
            "topology",
            f"{error} on vhost '{vhost}': set FETCHER_BROKER_DECLARE_TOPOLOGY=true, or load "
            f"the definitions (fetcher broker definitions --vhost '{vhost}' > topology.json; "
            "rabbitmqctl import_definitions topology.json)",
        )
    return _ok(
        "topology",
        f"work queue '{topology.work_queue}', dead-letter queue '{topology.dead_letter_queue}'"
        f" and exchange '{topology.events_exchange}' exist on vhost '{vhost}'",
    )


async def check_storage(settings: Settings, roles: Collection[str]) -> Finding:
    config = settings.storage
    if not config.uses_s3 or config.bucket is None:
        return _fail(
            "storage",
            "OBJECT_STORAGE_BUCKET is not set: the worker stores results in an S3 bucket "
            "(and OBJECT_STORAGE_ENDPOINT for a server other than AWS)",
        )
    from adapters.storage.s3 import S3ResultStorage
    from entrypoints.composition.infrastructure import s3_settings

    bucket = config.bucket
    where = f"bucket '{bucket}'" + (f" at {config.endpoint}" if config.endpoint else "")
    try:
        storage = await S3ResultStorage.open(s3_settings(settings))
    except StorageError as error:
        return _fail("storage", f"{where}: {_cause(error)}")
    try:
        await storage.check()
        await storage.check_writable()
    except StorageError as error:
        return _fail("storage", _storage_failure(bucket, where, error))
    finally:
        await storage.close()
    return _ok("storage", f"{where} exists and takes a write")


async def check_witness(settings: Settings, roles: Collection[str]) -> Finding:
    """The relay keeps each audit checkpoint in the bucket (``FETCHER_AUDIT_WITNESS``): not
    being able to is no reason not to start, so an unset bucket is a skip that says so."""
    if not settings.audit.witness:
        return Finding(SKIP, "witness", "FETCHER_AUDIT_WITNESS is off")
    if not settings.storage.uses_s3:
        return Finding(
            SKIP,
            "witness",
            "OBJECT_STORAGE_BUCKET is not set for the relay: the audit checkpoints are kept "
            "only in the database; set it (the results' bucket) or FETCHER_AUDIT_WITNESS=false",
        )
    if "worker" in roles:
        return Finding(SKIP, "witness", "the results' bucket, checked as storage")
    found = await check_storage(settings, roles)
    return Finding(found.status, "witness", found.detail)


def _storage_failure(bucket: str, where: str, error: StorageError) -> str:
    text = str(error)
    if "not found" in text:
        return f"bucket '{bucket}' does not exist: create it or set OBJECT_STORAGE_BUCKET"
    if "denied" in text:
        return (
            f"{where} refuses these credentials a write: check OBJECT_STORAGE_ACCESS_KEY_ID "
            "and OBJECT_STORAGE_SECRET_KEY, and that they may put and delete objects"
        )
    if isinstance(error, StorageRejected):
        return f"{where}: {text}"
    return f"{where} cannot be reached ({_cause(error)}): check OBJECT_STORAGE_ENDPOINT"


async def check_auth(settings: Settings, roles: Collection[str]) -> Finding:
    security = settings.security
    if security.issuer is None:
        if security.plugin_enabled:
            return Finding(SKIP, "auth", "tokens checked by the authorization service only")
        return Finding(SKIP, "auth", "no token verification (FETCHER_AUTH_ISSUER is not set)")
    if security.hs256_secret or security.public_key:
        return _ok("auth", f"static key for tokens of {security.issuer}")
    import aiohttp

    from adapters.auth.keys import JwksKeySource

    source = JwksKeySource(
        issuer=security.issuer, jwks_url=security.jwks_url, timeout=TIMEOUT_SECONDS / 2
    )
    try:
        count = await source.probe()
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
        setting = "FETCHER_AUTH_JWKS_URL" if security.jwks_url else "FETCHER_AUTH_ISSUER"
        cause = "no answer in time" if isinstance(error, TimeoutError) else _cause(error)
        return _fail("auth", f"{source.location}: {cause}: check {setting}")
    return _ok("auth", f"{source.location}: {count} signing key(s)")


Check = Callable[[Settings, Collection[str]], Awaitable[Finding]]
CHECKS: dict[str, Check] = {
    "key": check_key,
    "database": check_database,
    "broker": check_broker,
    "topology": check_topology,
    "storage": check_storage,
    "witness": check_witness,
    "auth": check_auth,
}


async def _bounded(item: str, check: Check, settings: Settings, roles: Collection[str]) -> Finding:
    try:
        return await asyncio.wait_for(check(settings, roles), TIMEOUT_SECONDS)
    except TimeoutError:
        return _fail(item, f"no answer within {TIMEOUT_SECONDS:g} s")


async def run_checks(env: Mapping[str, str] | None, roles: Collection[str]) -> list[Finding]:
    """The findings for ``roles`` under ``env`` (the process environment by default), in a
    fixed order: the settings first (nothing else is tried when they cannot be read), then
    every item one of the roles needs."""
    try:
        settings = Settings.from_env(env)
    except SettingsError as error:
        return [_fail("settings", str(error))]
    findings = [_ok("settings", f"read for {', '.join(r for r in ROLES if r in roles)}")]
    items = [item for item in CHECKS if any(item in ITEMS[role] for role in roles)]
    findings += await asyncio.gather(
        *(_bounded(item, CHECKS[item], settings, roles) for item in items)
    )
    return findings


def _check_command(args: argparse.Namespace) -> int:
    roles = ROLES if args.role == "all" else (args.role,)
    findings = asyncio.run(run_checks(None, roles))
    for finding in findings:
        print(finding.line(), flush=True)
    return 1 if any(f.status == FAIL for f in findings) else 0


def add_check_command(subparsers: Commands) -> None:
    parser = command(
        subparsers,
        "check",
        _check_command,
        help="try what a role needs (settings, key, database, broker, storage, issuer)",
        description="Read the settings and reach each dependency of the role as it would: "
        "the master key decodes, the database and the broker answer, the broker topology "
        "exists, the result bucket exists and takes a write (worker), the token issuer "
        "answers (api, when configured). One line per item, ok or what to do; exit 0 when "
        "nothing failed, else 1. Run it with the role's environment before starting it.",
    )
    parser.add_argument(
        "--role",
        choices=(*ROLES, "all"),
        default="all",
        help="the role to check for (default: all three)",
    )
