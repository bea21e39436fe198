"""The CRM plugin's compatibility path on MongoDB (reference §4.12; what it applies to:
``domain.crm``).

- **Logical collections.** A requested collection ``c`` is every physical collection whose
  name starts with ``c_``, read one after another in the order of their names, each in ``_id``
  order, and concatenated under ``c``. Discovery describes each name a job can ask for: every
  ``_``-prefix of a physical name, with the fields of all the collections it covers (dotted
  paths of embedded documents included, so ``contact.primary_email`` is a field).
- **Search hashes.** A filter on one of the eight searched fields compares its search hash
  (``search.*``): each string value becomes hex HMAC-SHA256 under the hash key. Only whole-value
  operators (``eq``, ``in``, ``ne``, ``nin``) are accepted there.
- **Decryption.** When a requested field is ``document`` or ``name`` or a dotted path (or the
  wildcard), every encrypted field present in a row is decrypted (base64 of nonce ‖ ciphertext
  ‖ tag, AES-GCM). A value that does not decrypt fails the job, naming the field and the
  collection, never the value or the key.
- Unlike the reference, these reads keep the engine's limits (size cap, deadline) and stream in
  chunks like every other read.

Rows: the requested top-level fields (``null`` when a document lacks one); a dotted field comes
inside its embedded document, as MongoDB projects it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.datasources.common.filter_fields import place
from adapters.datasources.mongodb.schema import field_type
from adapters.datasources.mongodb.statements import field_conditions, merge, requested_fields
from adapters.datasources.mongodb.values import top_level
from application.errors import DatasourceDataError
from domain import crm
from domain import error_catalogue as catalogue
from domain.connection import Endpoint
from domain.crm import CrmKeys
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead

_NONCE = 12


def search_hash(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


# --- discovery


def logical_tables(physical: Iterable[Table]) -> dict[str, Table]:
    """The logical collections the physical ones make up, by name: each ``_``-prefix of a
    physical name (``holder_links_1`` gives ``holder`` and ``holder_links``), with the union
    of the columns of the collections it covers (first seen first; a field typed differently
    in two collections is ``mixed``, numbers the widest)."""
    columns: dict[str, dict[str, str]] = {}
    for table in sorted(physical, key=lambda t: t.name):
        for logical in _prefixes(table.name):
            known = columns.setdefault(logical, {})
            for column in table.columns:
                seen = known.get(column.name)
                known[column.name] = (
                    column.data_type if seen is None else _merged(seen, column.data_type)
                )
    return {
        name: Table(
            schema=None,
            name=name,
            columns=tuple(Column(c, data_type) for c, data_type in fields.items()),
        )
        for name, fields in sorted(columns.items())
    }


def _prefixes(name: str) -> list[str]:
    return [name[:i] for i, ch in enumerate(name) if ch == "_" and i > 0]


def _merged(a: str, b: str) -> str:
    return field_type({a, b})


def covers(logical: str, collection: str) -> bool:
    return collection.startswith(logical + "_")


# --- queries


@dataclass(frozen=True, slots=True)
class CrmQuery:
    """One logical collection's read: the collections it covers are listed when it runs."""

    result_key: str
    logical: str
    names: tuple[str, ...]
    roots: tuple[str, ...]
    whole: bool
    decrypt: bool
    filter: dict[str, Any]
    projection: dict[str, int] | None


def crm_query(endpoint: Endpoint, read: TableRead, keys: CrmKeys) -> CrmQuery | None:
    """The read of one logical collection, or ``None`` when no field is asked for. A filter on
    a searched field compares hashes; one it cannot answer raises ``InvalidRequest``."""
    names, whole, types = requested_fields(read)
    if not names:
        return None
    database = endpoint.database_name

    def where(name: str) -> str:
        return place(read.result_key, name, database)

    conditions: list[tuple[str | None, dict[str, Any]]] = []
    for name, condition in read.filters.items():
        if name in crm.SEARCH_FIELDS:
            conditions.extend(
                field_conditions(
                    crm.SEARCH_FIELDS[name],
                    "string",
                    _hashed(condition, keys, where(name)),
                    where=where(name),
                )
            )
        else:
            conditions.extend(
                field_conditions(name, types.get(name, "mixed"), condition, where=where(name))
            )
    projection = None if whole else _projection(names)
    return CrmQuery(
        result_key=read.result_key,
        logical=read.table.name,
        names=names,
        roots=tuple(dict.fromkeys(name.split(".", 1)[0] for name in names)),
        whole=whole,
        decrypt=crm.decrypts(names) or whole,
        filter=merge(conditions),
        projection=projection,
    )


def _hashed(
    condition: Mapping[str, Sequence[Any]], keys: CrmKeys, where: str
) -> dict[str, Sequence[Any]]:
    other = [op for op in condition if op not in crm.HASHED_OPERATORS and condition[op]]
    if other:
        raise InvalidRequest(
            f"filter on {where}: operator '{other[0]}' cannot be answered: the field is stored "
            f"encrypted and searched by a hash of whole values "
            f"(use {', '.join(crm.HASHED_OPERATORS)})"
        )
    if keys.hash_key is None:
        raise InvalidRequest(catalogue.CRM_HASH_KEY_MISSING.message)
    key = keys.hash_key
    return {
        op: [search_hash(key, v) if isinstance(v, str) else v for v in values]
        for op, values in condition.items()
    }


def _projection(names: Sequence[str]) -> dict[str, int]:
    """Each requested path once; a path inside another requested one is left out (MongoDB
    refuses a projection with both)."""
    kept = [
        name
        for name in names
        if not any(name.startswith(other + ".") for other in names if other != name)
    ]
    projection = dict.fromkeys(kept, 1)
    if "_id" not in projection:
        projection["_id"] = 0
    return projection


# --- rows


class Decryptor:
    """Decrypts a row's encrypted fields in place."""

    def __init__(self, key: bytes | None) -> None:
        self._aead = None if key is None else AESGCM(key)

    def decrypt(self, document: dict[str, Any], collection: str) -> None:
        for path in crm.ENCRYPTED_PATHS:
            holder: Any = document
            for part in path[:-1]:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if not isinstance(holder, dict):
                continue
            value = holder.get(path[-1])
            if isinstance(value, str) and value:
                holder[path[-1]] = self._open(value, ".".join(path), collection)

    def _open(self, value: str, name: str, collection: str) -> str:
        if self._aead is None:
            raise DatasourceDataError(
                catalogue.CRM_ENCRYPT_KEY_MISSING.cite(catalogue.CRM_ENCRYPT_KEY_MISSING.message),
                category="precondition",
            )
        try:
            blob = base64.b64decode(value, validate=True)
            if len(blob) <= _NONCE:
                raise ValueError("too short")
            return self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], None).decode()
        except (binascii.Error, ValueError, InvalidTag, UnicodeDecodeError):
            raise DatasourceDataError(
                f"field '{name}' of a document in plugin_crm collection '{collection}' does "
                f"not decrypt with {crm.ENCRYPT_KEY_SETTING} (a different key, or a value the "
                "CRM plugin did not encrypt)",
                category="precondition",
            ) from None


def crm_row(
    query: CrmQuery, document: dict[str, Any], collection: str, decryptor: Decryptor
) -> dict[str, Any]:
    if query.decrypt:
        decryptor.decrypt(document, collection)
    if query.whole:
        for name in query.roots:
            document.setdefault(name, None)
        return {name: top_level(value) for name, value in sorted(document.items())}
    return {root: top_level(document.get(root)) for root in query.roots}


def collections_missing(logical: str) -> DatasourceDataError:
    entry = catalogue.CRM_COLLECTIONS_NOT_FOUND
    return DatasourceDataError(entry.cite(entry.render(prefix=logical + "_")))
