"""Bearer tokens checked against an issuer served on loopback: discovery, key set cache,
rotation, rate limit, and every way a token can fail."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import jwt
import pytest

from adapters.auth.claims import ClaimNames, ClaimPermissions
from adapters.auth.jwt_verifier import PyJwtTokenVerifier, UnverifiedClaimsReader
from adapters.auth.keys import ASYMMETRIC_ALGORITHMS, JwksKeySource, StaticKey
from application.errors import AuthServiceUnavailable, PermissionDenied, Unauthenticated
from domain.identity import Permission
from tests.integration.auth_servers import (
    LocalIdentityProvider,
    SigningKey,
    hmac_token,
    new_key,
    unsigned_token,
)
from tests.support.connection_kit import Ticks


@pytest.fixture
def idp() -> Iterator[LocalIdentityProvider]:
    provider = LocalIdentityProvider().start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
async def keys(idp: LocalIdentityProvider, ticks: Ticks) -> AsyncIterator[JwksKeySource]:
    source = JwksKeySource(issuer=idp.issuer, min_interval=30, max_age=600, clock=ticks)
    await source.open()
    try:
        yield source
    finally:
        await source.close()


def verifier_for(idp: LocalIdentityProvider, keys, **kwargs) -> PyJwtTokenVerifier:
    options = {
        "issuer": idp.issuer,
        "audience": [idp.audience],
        "algorithms": ASYMMETRIC_ALGORITHMS,
    }
    return PyJwtTokenVerifier(keys, **{**options, **kwargs})


async def refused(verifier, token: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        await verifier.verify(token)
    assert caught.value.token_given and caught.value.code == "FET-0006"
    assert token not in caught.value.message
    return caught.value.message


async def test_keys_are_discovered_from_the_issuer_once(idp, keys):
    verifier = verifier_for(idp, keys)
    for _ in range(20):
        identity = await verifier.verify(idp.token(["connections:get"]))
    assert identity.subject == "user-1" and identity.permissions == {"connections:get"}
    assert identity.tenant == "tenant-a"
    assert idp.server.count(f"GET {idp.discovery_path}") == 1
    assert idp.server.count(f"GET {idp.jwks_path}") == 1


async def test_a_key_set_that_arrives_in_pieces_is_read_whole(idp, ticks):
    idp.key_set_in_pieces = True
    for _ in range(6):
        idp.rotate()
    source = JwksKeySource(issuer=idp.issuer, min_interval=30, max_age=600, clock=ticks)
    await source.open()
    try:
        identity = await verifier_for(idp, source).verify(idp.token(["connections:get"]))
    finally:
        await source.close()
    assert identity.permissions == {"connections:get"}


async def test_a_rotated_key_is_picked_up_without_restart(idp, keys, ticks):
    verifier = verifier_for(idp, keys)
    old = idp.current
    await verifier.verify(idp.token())
    rotated = idp.rotate(drop_old=True)
    ticks.value += 31
    identity = await verifier.verify(idp.token(key=rotated))
    assert identity.subject == "user-1"
    assert idp.server.count(f"GET {idp.jwks_path}") == 2
    assert await refused(verifier, idp.token(key=old)) == (
        "The bearer token is not valid: the token's signing key is not one of the issuer's keys."
    )


async def test_unknown_key_ids_refetch_at_most_once_per_interval(idp, keys, ticks):
    verifier = verifier_for(idp, keys)
    ticks.value += 31
    strangers = [SigningKey(f"made-up-{i}", "RS256", idp.current.private) for i in range(30)]
    messages = await asyncio.gather(*(refused(verifier, idp.token(key=k)) for k in strangers))
    assert set(messages) == {
        "The bearer token is not valid: the token's signing key is not one of the issuer's keys."
    }
    assert idp.server.count(f"GET {idp.jwks_path}") == 2
    await refused(verifier, idp.token(key=new_key(kid="another")))
    assert idp.server.count(f"GET {idp.jwks_path}") == 2
    rotated = idp.rotate()
    await refused(verifier, idp.token(key=rotated))  # within the interval: not fetched yet
    ticks.value += 31
    assert (await verifier.verify(idp.token(key=rotated))).subject == "user-1"
    assert idp.server.count(f"GET {idp.jwks_path}") == 3


async def test_the_key_set_is_refreshed_when_old_and_kept_when_the_issuer_is_down(
    idp, keys, ticks, caplog
):
    verifier = verifier_for(idp, keys)
    ticks.value += 601
    await verifier.verify(idp.token())
    assert idp.server.count(f"GET {idp.jwks_path}") == 2
    idp.stop()
    ticks.value += 601
    with caplog.at_level(logging.WARNING):
        assert (await verifier.verify(idp.token())).subject == "user-1"
    assert "could not fetch the token signing keys" in caplog.text


async def test_an_unreachable_issuer_is_a_503_until_it_answers(caplog):
    with caplog.at_level(logging.WARNING):
        source = JwksKeySource(issuer="http://127.0.0.1:9/realms/none", timeout=1)
        await source.open()
    try:
        assert "could not fetch the token signing keys" in caplog.text
        with pytest.raises(AuthServiceUnavailable) as caught:
            await source.key_for("any", "RS256")
        assert caught.value.code == "FET-0008"
        assert caught.value.message.startswith("The token issuer's signing keys")
    finally:
        await source.close()


async def test_a_discovery_document_naming_another_issuer_is_not_trusted(idp, ticks, caplog):
    idp.advertised_issuer = "http://elsewhere.example/realms/fetcher"
    source = JwksKeySource(issuer=idp.issuer, clock=ticks)
    with caplog.at_level(logging.WARNING):
        await source.open()
    try:
        assert "the discovery document names another issuer" in caplog.text
        with pytest.raises(AuthServiceUnavailable):
            await source.key_for("first", "RS256")
        assert idp.server.count(f"GET {idp.jwks_path}") == 0
    finally:
        await source.close()


async def test_a_configured_key_set_url_needs_no_discovery(idp, ticks):
    source = JwksKeySource(jwks_url=idp.jwks_url, clock=ticks)
    await source.open()
    try:
        identity = await verifier_for(idp, source).verify(idp.token())
        assert identity.subject == "user-1"
        assert idp.server.count(f"GET {idp.discovery_path}") == 0
    finally:
        await source.close()


async def test_every_bad_token_is_refused_with_its_reason(idp, keys):
    verifier = verifier_for(idp, keys)
    now = int(time.time())
    impostor = new_key(kid=idp.current.kid)  # same kid, another private key
    confused = hmac_token(idp.claims(), idp.current.public_pem(), idp.current.kid)
    cases = {
        idp.token(key=impostor): "the token's signature does not verify",
        idp.token(exp=now - 120): "the token has expired",
        idp.token(nbf=now + 120): "the token is not valid yet",
        idp.token(iat=now + 600): "the token is not valid yet",
        idp.token(aud="another-api"): "the token was issued for another audience",
        idp.token(
            iss="http://evil.example/realms/fetcher"
        ): "the token was issued by another issuer",
        idp.token(exp=None): "the token lacks a required claim (exp, iss, aud)",
        idp.token(aud=None): "the token lacks a required claim (exp, iss, aud)",
        unsigned_token(idp.claims()): "the token's algorithm is not allowed",
        confused: "the token's algorithm is not allowed",
        "not.a.token": "the token is malformed",
        "x" * 20_000: "the token is malformed",
    }
    for token, reason in cases.items():
        assert await refused(verifier, token) == f"The bearer token is not valid: {reason}."


async def test_a_small_clock_skew_is_tolerated(idp, keys):
    verifier = verifier_for(idp, keys, leeway=30)
    now = int(time.time())
    assert (await verifier.verify(idp.token(exp=now - 10, nbf=now + 10))).subject == "user-1"


async def test_a_key_that_states_its_algorithm_checks_only_that_algorithm(idp, keys):
    verifier = verifier_for(idp, keys)
    key = idp.current
    other_alg = jwt.encode(idp.claims(), key.private, algorithm="PS256", headers={"kid": key.kid})
    assert await refused(verifier, other_alg) == (
        "The bearer token is not valid: the token's algorithm is not allowed for its key."
    )


async def test_elliptic_curve_keys_and_role_lists_in_nested_claims(idp, ticks):
    ec_key = idp.rotate("ES256")
    source = JwksKeySource(issuer=idp.issuer, clock=ticks)
    await source.open()
    try:
        names = ClaimNames(permissions="realm_access.roles", tenant="org.id")
        verifier = verifier_for(idp, source, names=names)
        token = idp.token(
            key=ec_key,
            realm_access={"roles": ["fetcher:history", "offline_access"]},
            org={"id": "acme"},
        )
        identity = await verifier.verify(token)
        assert identity.permissions == {"fetcher:history", "offline_access"}
        assert identity.tenant == "acme"
        assert token not in repr(identity)
    finally:
        await source.close()


async def test_only_signature_keys_are_taken(idp, ticks):
    enc = new_key(kid="encryption")
    enc.use = "enc"
    idp.keys.append(enc)
    source = JwksKeySource(issuer=idp.issuer, clock=ticks)
    await source.open()
    try:
        assert await refused(verifier_for(idp, source), idp.token(key=enc))
    finally:
        await source.close()


async def test_a_pem_public_key_and_an_hs256_secret_for_small_setups(idp):
    static = StaticKey.from_pem(idp.current.public_pem().decode())
    verifier = verifier_for(idp, static, algorithms=static.algorithms)
    assert (await verifier.verify(idp.token())).subject == "user-1"
    assert await refused(verifier, idp.token(key=new_key())) == (
        "The bearer token is not valid: the token's signature does not verify."
    )

    secret = uuid.uuid4().hex * 2
    shared = PyJwtTokenVerifier(
        StaticKey.from_secret(secret),
        issuer=idp.issuer,
        audience=[idp.audience],
        algorithms=["HS256"],
    )
    token = jwt.encode(idp.claims(), secret, algorithm="HS256")
    assert (await shared.verify(token)).subject == "user-1"
    assert await refused(shared, jwt.encode(idp.claims(), secret + "x", algorithm="HS256"))
    assert await refused(shared, idp.token())  # RS256 is not on the list


def test_a_pem_that_is_not_a_public_key_is_refused():
    with pytest.raises(ValueError):
        StaticKey.from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")


async def test_the_plugin_mode_without_keys_reads_claims_unverified(idp):
    reader = UnverifiedClaimsReader()
    forged = idp.token(key=new_key())
    assert (await reader.verify(forged)).subject == "user-1"
    assert (await reader.verify(unsigned_token({"sub": "x"}))).subject == "x"
    assert await refused(reader, "garbage")


@pytest.mark.parametrize("claim", [5, "", ["tenant-a"], True])
async def test_only_a_non_empty_text_tenant_claim_names_a_tenant(idp, keys, claim):
    identity = await verifier_for(idp, keys).verify(idp.token(tenantId=claim))
    assert identity.tenant is None


async def test_claims_grant_exactly_their_permissions(idp, keys):
    identity = await verifier_for(idp, keys).verify(idp.token(["connections:get"]))
    authorizer = ClaimPermissions()
    await authorizer.authorize(identity, Permission.CONNECTIONS_GET, "t")
    with pytest.raises(PermissionDenied):
        await authorizer.authorize(identity, Permission.CONNECTIONS_POST, "t")


def test_claim_names_are_fixed_once_built():
    names = ClaimNames()
    with pytest.raises(dataclasses.FrozenInstanceError):
        names.tenant = "other"  # type: ignore[misc]
    assert {names: 1}[ClaimNames()] == 1


def _token_of_length(idp: LocalIdentityProvider, length: int) -> str:
    """A valid token of exactly ``length`` characters: a padding claim sized to fit, and a
    padding header field to reach the lengths base64 steps over."""
    for extra in range(4):
        headers = {"x": "h" * extra}
        low, high = 0, length
        while low <= high:  # the token only grows with the claim's size
            middle = (low + high) // 2
            token = idp.token(pad="x" * middle, headers=headers)
            if len(token) == length:
                return token
            if len(token) < length:
                low = middle + 1
            else:
                high = middle - 1
    raise AssertionError(f"no token of {length} characters")


async def test_a_token_up_to_16_kib_is_read_and_a_longer_one_is_not(idp, keys):
    limit = 16 * 1024  # the documented limit, written out
    verifier = verifier_for(idp, keys)
    reader = UnverifiedClaimsReader()
    longest, too_long = _token_of_length(idp, limit), _token_of_length(idp, limit + 1)
    assert (await verifier.verify(longest)).subject == "user-1"
    assert (await reader.verify(longest)).subject == "user-1"
    assert (
        await refused(verifier, too_long)
        == "The bearer token is not valid: the token is malformed."
    )
    with pytest.raises(Unauthenticated):
        await reader.verify(too_long)


@pytest.mark.parametrize("algorithms", [[], ["none"], ["NONE"], ["RS256", "None"]])
def test_the_algorithm_list_is_never_empty_nor_none(idp, algorithms):
    with pytest.raises(ValueError, match="without 'none'"):
        PyJwtTokenVerifier(
            StaticKey(b"k" * 32), issuer=idp.issuer, audience=[idp.audience],
            algorithms=algorithms,
        )  # fmt: skip


async def test_a_shared_secret_shorter_than_the_hash_is_refused(idp):
    secret = "short-secret"
    shared = PyJwtTokenVerifier(
        StaticKey.from_secret(secret), issuer=idp.issuer, audience=[idp.audience],
        algorithms=["HS256"],
    )  # fmt: skip
    token = jwt.encode(idp.claims(), secret, algorithm="HS256")
    assert "not allowed for its key" in await refused(shared, token)
