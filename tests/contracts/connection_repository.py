"""One contract for every connection repository: the in-memory twin (unit suite), SQLite and
PostgreSQL (integration suite).

A subclass provides a ``repo`` fixture yielding a fresh, empty repository, and a
``secrets_at_rest`` fixture reading its storage directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID, uuid4

import pytest

from application.ports.connection_repository import ConnectionQuery, ConnectionRepository
from domain.connection import Connection, DatabaseType, SealedSecret, SslSettings
from domain.errors import ConcurrencyConflict, Conflict, EntityNotFound
from domain.tenant import SINGLE_TENANT, Tenant

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
FET_1002_MESSAGE = (
    "An entity of type connection with the same unique attributes already exists. Please use "
    "different values to avoid conflicts and review the data provided in the request."
)

Repository = ConnectionRepository
SecretsAtRest = Callable[[UUID], Awaitable[dict[str, object]]]
"""What the storage itself still holds of a connection's secrets (deleted rows included):
each of password, SSL CA, certificate and key, None once nothing of it is left."""
SECRET_NAMES = ("password", "ssl_ca", "ssl_cert", "ssl_key")
TENANT_A, TENANT_B = Tenant("tenant-a"), Tenant("tenant-b")


def _connection(
    name: str = "billing",
    *,
    product: str = "billing-app",
    kind: DatabaseType = DatabaseType.POSTGRESQL,
    created: datetime = T0,
) -> Connection:
    return Connection(
        id=uuid4(),
        product_name=product,
        config_name=name,
        type=kind,
        host="db.internal.example",
        port=5432,
        database_name="billing",
        user_name="reader",
        password=SealedSecret(ciphertext="bm9uY2UxMjM0NTY3ODk=", key_version="v2"),
        schema="public",
        ssl=SslSettings(
            mode="verify-full",
            ca=SealedSecret("Y2E=", "v2"),
            cert=SealedSecret("Y2VydA==", "v1"),
            key=None,
        ),
        metadata={"team": "finance", "tags": ["a", "b"], "limits": {"rows": 10}},
        created_at=created,
        updated_at=created,
    )


class ConnectionRepositoryContract:
    """Subclasses provide a ``repo`` fixture yielding a fresh, empty repository, and a
    ``secrets_at_rest`` fixture reading its storage directly."""

    async def test_add_then_get_round_trips_every_field(self, repo: Repository) -> None:
        connection = _connection()
        await repo.add(connection)

        assert await repo.get(connection.id, tenant=SINGLE_TENANT) == connection
        assert await repo.get(uuid4(), tenant=SINGLE_TENANT) is None

    async def test_minimal_connection_round_trips(self, repo: Repository) -> None:
        connection = replace(
            _connection(product=""), password=None, schema=None, ssl=None, metadata={}
        )
        await repo.add(connection)
        assert await repo.get(connection.id, tenant=SINGLE_TENANT) == connection

    async def test_datetimes_come_back_as_utc(self, repo: Repository) -> None:
        plus_two = timezone(timedelta(hours=2))
        connection = _connection(created=datetime(2025, 6, 1, 12, 0, tzinfo=plus_two))
        await repo.add(connection)

        stored = await repo.get(connection.id, tenant=SINGLE_TENANT)
        assert stored is not None and stored.created_at is not None
        assert stored.created_at.utcoffset() == timedelta(0)
        assert stored.created_at == datetime(2025, 6, 1, 10, 0, tzinfo=UTC)

    async def test_duplicate_config_name_conflicts_with_fet_1002(self, repo: Repository) -> None:
        await repo.add(_connection("billing"))

        with pytest.raises(Conflict) as raised:
            await repo.add(_connection("billing", product="other"))

        assert raised.value.code == "FET-1002"
        assert raised.value.title == "Conflict"
        taken = "'billing' is already used by another connection"
        assert raised.value.message == f"{FET_1002_MESSAGE} configName {taken}."
        assert raised.value.fields == {"configName": taken}

    async def test_config_name_is_free_again_after_soft_delete(self, repo: Repository) -> None:
        first = _connection("billing")
        await repo.add(first)
        assert await repo.soft_delete(first.id, T0 + timedelta(hours=1), tenant=SINGLE_TENANT)

        second = _connection("billing")
        await repo.add(second)
        assert await repo.get(first.id, tenant=SINGLE_TENANT) is None
        assert await repo.by_config_names(["billing"], tenant=SINGLE_TENANT) == {"billing": second}

    async def test_soft_delete_twice_returns_false_the_second_time(self, repo: Repository) -> None:
        connection = _connection()
        await repo.add(connection)

        assert await repo.soft_delete(connection.id, T0, tenant=SINGLE_TENANT) is True
        assert await repo.soft_delete(connection.id, T0, tenant=SINGLE_TENANT) is False
        assert await repo.soft_delete(uuid4(), T0, tenant=SINGLE_TENANT) is False

    async def test_soft_delete_erases_the_sealed_credentials(
        self, repo: Repository, secrets_at_rest: SecretsAtRest
    ) -> None:
        connection = _connection()
        assert connection.ssl is not None
        connection = replace(
            connection, ssl=replace(connection.ssl, key=SealedSecret("a2V5", "v2"))
        )
        kept = _connection("kept")
        await repo.add(connection)
        await repo.add(kept)
        before = await secrets_at_rest(connection.id)
        assert set(before) == set(SECRET_NAMES) and None not in before.values()

        assert await repo.soft_delete(connection.id, T0 + timedelta(hours=1), tenant=SINGLE_TENANT)

        assert await secrets_at_rest(connection.id) == dict.fromkeys(SECRET_NAMES)
        assert await repo.get(kept.id, tenant=SINGLE_TENANT) == kept

    async def test_by_config_names_ignores_deleted_and_unknown(self, repo: Repository) -> None:
        kept, gone = _connection("kept"), _connection("gone")
        await repo.add(kept)
        await repo.add(gone)
        await repo.soft_delete(gone.id, T0, tenant=SINGLE_TENANT)

        assert await repo.by_config_names(["kept", "gone", "unknown"], tenant=SINGLE_TENANT) == {
            "kept": kept
        }
        assert await repo.by_config_names([], tenant=SINGLE_TENANT) == {}

    async def test_list_pages_in_creation_order_with_total(self, repo: Repository) -> None:
        created = [_connection(f"c{i}", created=T0 + timedelta(minutes=i)) for i in range(5)]
        for c in reversed(created):
            await repo.add(c)

        newest_first = await repo.list(ConnectionQuery(page=1, limit=2), tenant=SINGLE_TENANT)
        assert [c.config_name for c in newest_first.items] == ["c4", "c3"]
        assert newest_first.total == 5

        last_page = await repo.list(ConnectionQuery(page=3, limit=2), tenant=SINGLE_TENANT)
        assert [c.config_name for c in last_page.items] == ["c0"]

        oldest_first = await repo.list(
            ConnectionQuery(page=2, limit=2, descending=False), tenant=SINGLE_TENANT
        )
        assert [c.config_name for c in oldest_first.items] == ["c2", "c3"]

        beyond = await repo.list(ConnectionQuery(page=9, limit=2), tenant=SINGLE_TENANT)
        assert (beyond.items, beyond.total) == ([], 5)

    async def test_list_breaks_creation_time_ties_by_id(self, repo: Repository) -> None:
        same_time = [_connection(f"t{i}") for i in range(4)]
        for c in same_time:
            await repo.add(c)

        ascending = await repo.list(
            ConnectionQuery(limit=10, descending=False), tenant=SINGLE_TENANT
        )
        descending = await repo.list(ConnectionQuery(limit=10), tenant=SINGLE_TENANT)
        assert [c.id for c in ascending.items] == sorted(c.id for c in same_time)
        assert [c.id for c in descending.items] == sorted((c.id for c in same_time), reverse=True)

    async def test_list_filters_and_counts_only_matches(self, repo: Repository) -> None:
        await repo.add(_connection("a", product="p1", created=T0))
        await repo.add(
            _connection("b", product="p1", kind=DatabaseType.MYSQL, created=T0 + timedelta(days=1))
        )
        await repo.add(_connection("c", product="p2", created=T0 + timedelta(days=2)))
        deleted = _connection("d", product="p1", created=T0 + timedelta(days=1))
        await repo.add(deleted)
        await repo.soft_delete(deleted.id, T0, tenant=SINGLE_TENANT)

        by_product = await repo.list(
            ConnectionQuery(product_name="p1", limit=10), tenant=SINGLE_TENANT
        )
        assert [c.config_name for c in by_product.items] == ["b", "a"]
        assert by_product.total == 2

        by_type = await repo.list(ConnectionQuery(type="mysql", limit=10), tenant=SINGLE_TENANT)
        assert [c.config_name for c in by_type.items] == ["b"]

        window = await repo.list(
            ConnectionQuery(
                created_from=T0 + timedelta(days=1),
                created_to=T0 + timedelta(days=2),
                limit=1,
                descending=False,
            ),
            tenant=SINGLE_TENANT,
        )
        assert [c.config_name for c in window.items] == ["b"]
        assert window.total == 2

    async def test_concurrent_assign_product_has_exactly_one_winner(self, repo: Repository) -> None:
        unowned = _connection(product="")
        await repo.add(unowned)

        results = await asyncio.gather(
            *(
                repo.assign_product(unowned.id, f"product-{i}", T0, tenant=SINGLE_TENANT)
                for i in range(10)
            )
        )

        winners = [r for r in results if r is not None]
        assert len(winners) == 1
        stored = await repo.get(unowned.id, tenant=SINGLE_TENANT)
        assert stored == winners[0]
        assert stored.product_name.startswith("product-")
        assert stored.version == unowned.version + 1

    async def test_assign_product_skips_owned_deleted_and_unknown(self, repo: Repository) -> None:
        owned, deleted = _connection("owned"), _connection("deleted", product="")
        await repo.add(owned)
        await repo.add(deleted)
        await repo.soft_delete(deleted.id, T0, tenant=SINGLE_TENANT)

        assert await repo.assign_product(owned.id, "thief", T0, tenant=SINGLE_TENANT) is None
        assert await repo.assign_product(deleted.id, "late", T0, tenant=SINGLE_TENANT) is None
        assert await repo.assign_product(uuid4(), "nobody", T0, tenant=SINGLE_TENANT) is None
        assert await repo.get(owned.id, tenant=SINGLE_TENANT) == owned

    async def test_update_writes_the_next_version(self, repo: Repository) -> None:
        connection = _connection()
        await repo.add(connection)
        later = T0 + timedelta(hours=1)
        changed = replace(
            connection, host="db2.internal.example", port=6432, updated_at=later, version=2
        )

        assert await repo.update(changed) == changed
        assert await repo.get(connection.id, tenant=SINGLE_TENANT) == changed

    async def test_update_of_a_stale_version_conflicts(self, repo: Repository) -> None:
        connection = _connection()
        await repo.add(connection)
        await repo.update(replace(connection, host="first", version=2))

        with pytest.raises(ConcurrencyConflict):
            await repo.update(replace(connection, host="second", version=2))
        stored = await repo.get(connection.id, tenant=SINGLE_TENANT)
        assert stored is not None and stored.host == "first"

    async def test_update_to_a_taken_name_or_of_a_missing_connection_fails(
        self, repo: Repository
    ) -> None:
        one, two = _connection("one"), _connection("two")
        await repo.add(one)
        await repo.add(two)

        with pytest.raises(Conflict) as raised:
            await repo.update(replace(two, config_name="one", version=2))
        assert raised.value.code == "FET-1002"
        with pytest.raises(EntityNotFound):
            await repo.update(replace(_connection("ghost"), version=2))

    async def test_check_passes_when_reachable(self, repo: Repository) -> None:
        await repo.check()

    # Tenants: every read and write stays within one tenant.

    async def test_each_tenant_reads_only_its_own_connections(self, repo: Repository) -> None:
        single = _connection("billing")
        in_a = replace(_connection("billing", created=T0 + timedelta(minutes=1)), tenant=TENANT_A)
        in_b = replace(_connection("billing", created=T0 + timedelta(minutes=2)), tenant=TENANT_B)
        other_b = replace(_connection("other", product=""), tenant=TENANT_B)
        for connection in (single, in_a, in_b, other_b):
            await repo.add(connection)

        assert await repo.get(in_a.id, tenant=TENANT_A) == in_a
        assert await repo.get(in_b.id, tenant=TENANT_B) == in_b
        assert await repo.get(single.id, tenant=SINGLE_TENANT) == single
        assert await repo.get(in_b.id, tenant=TENANT_A) is None
        assert await repo.get(in_b.id, tenant=SINGLE_TENANT) is None
        assert await repo.get(single.id, tenant=TENANT_A) is None
        assert await repo.by_config_names(["billing", "other"], tenant=TENANT_A) == {
            "billing": in_a
        }
        assert await repo.by_config_names(["billing", "other"], tenant=TENANT_B) == {
            "billing": in_b,
            "other": other_b,
        }
        assert await repo.by_config_names(["billing", "other"], tenant=SINGLE_TENANT) == {
            "billing": single
        }
        listed = await repo.list(ConnectionQuery(limit=10), tenant=TENANT_B)
        assert ([c.id for c in listed.items], listed.total) == ([in_b.id, other_b.id], 2)
        unassigned = await repo.list(ConnectionQuery(limit=10, unassigned=True), tenant=TENANT_A)
        assert (unassigned.items, unassigned.total) == ([], 0)
        assert (await repo.list(ConnectionQuery(limit=10), tenant=SINGLE_TENANT)).total == 1

    async def test_writes_never_reach_another_tenants_connection(self, repo: Repository) -> None:
        theirs = replace(_connection("billing", product=""), tenant=TENANT_B)
        await repo.add(theirs)

        assert await repo.assign_product(theirs.id, "thief", T0, tenant=TENANT_A) is None
        assert await repo.assign_product(theirs.id, "thief", T0, tenant=SINGLE_TENANT) is None
        assert await repo.soft_delete(theirs.id, T0, tenant=TENANT_A) is False
        with pytest.raises(EntityNotFound):
            await repo.update(replace(theirs, tenant=TENANT_A, host="moved", version=2))
        assert await repo.get(theirs.id, tenant=TENANT_B) == theirs

        owned = await repo.assign_product(theirs.id, "payments", T0, tenant=TENANT_B)
        assert owned is not None and owned.tenant == TENANT_B
        changed = replace(owned, host="db2", version=owned.version + 1)
        assert await repo.update(changed) == changed
        assert await repo.soft_delete(theirs.id, T0, tenant=TENANT_B) is True

    async def test_config_names_are_unique_within_a_tenant(self, repo: Repository) -> None:
        one = replace(_connection("one"), tenant=TENANT_A)
        two = replace(_connection("two"), tenant=TENANT_A)
        elsewhere = replace(_connection("two"), tenant=TENANT_B)
        for connection in (one, two, elsewhere):
            await repo.add(connection)

        with pytest.raises(Conflict):
            await repo.add(replace(_connection("one"), tenant=TENANT_A))
        with pytest.raises(Conflict):
            await repo.update(replace(two, config_name="one", version=2))
        renamed = replace(elsewhere, config_name="one", version=2)
        assert await repo.update(renamed) == renamed
