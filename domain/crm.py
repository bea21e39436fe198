"""The CRM plugin's compatibility path (reference §4.12): which datasource takes it and what the
plugin stores.

A MongoDB connection named exactly ``plugin_crm`` holds the CRM plugin's data: each logical
collection ``c`` is spread over physical collections ``c_<suffix>`` (one per organisation),
personal fields are stored encrypted, and eight of them have a search hash under ``search.*``
that filters compare instead of the (encrypted) field itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain import error_catalogue as catalogue
from domain.connection import DatabaseType
from domain.error_catalogue import CatalogueEntry

CONFIG_NAME = "plugin_crm"

HASH_KEY_SETTING = "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM"
"""The HMAC key of the search hashes (its UTF-8 bytes)."""
ENCRYPT_KEY_SETTING = "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM"
"""The AES key of the encrypted fields, hex-encoded."""

SEARCH_FIELDS: Mapping[str, str] = {
    "document": "search.document",
    "name": "search.name",
    "banking_details.account": "search.banking_details_account",
    "banking_details.iban": "search.banking_details_iban",
    "contact.primary_email": "search.contact_primary_email",
    "contact.secondary_email": "search.contact_secondary_email",
    "contact.mobile_phone": "search.contact_mobile_phone",
    "contact.other_phone": "search.contact_other_phone",
}
"""A filter on the key compares the value's search hash with the field named by the value."""

HASHED_OPERATORS = ("eq", "in", "ne", "nin")
"""The operators a search hash can answer: it matches whole values only."""

ENCRYPTED_PATHS: tuple[tuple[str, ...], ...] = (
    ("document",),
    ("name",),
    ("contact", "primary_email"),
    ("contact", "secondary_email"),
    ("contact", "mobile_phone"),
    ("contact", "other_phone"),
    ("banking_details", "account"),
    ("banking_details", "iban"),
    ("legal_person", "representative", "name"),
    ("legal_person", "representative", "document"),
    ("legal_person", "representative", "email"),
    ("natural_person", "mother_name"),
    ("natural_person", "father_name"),
)
"""The fields stored encrypted (base64 of nonce ‖ ciphertext ‖ tag, AES-GCM)."""


@dataclass(frozen=True, slots=True)
class CrmKeys:
    """The deployment's keys (the same for every tenant, as the reference's): ``hash_key``
    the search hashes' HMAC key (the setting's UTF-8 bytes), ``encrypt_key`` the AES key (the
    setting hex-decoded). Either may be absent."""

    hash_key: bytes | None = field(default=None, repr=False)
    encrypt_key: bytes | None = field(default=None, repr=False)

    def missing(
        self, tables: Mapping[str, Iterable[str]], filters: Mapping[str, Mapping[str, Any]]
    ) -> list[str]:
        """The settings a job reading ``tables`` with ``filters`` on the datasource lacks."""
        return missing_keys(
            tables,
            filters,
            hash_key=self.hash_key is not None,
            encrypt_key=self.encrypt_key is not None,
        )


def is_crm(config_name: str, db_type: DatabaseType) -> bool:
    """Whether a datasource takes the compatibility path: the name exactly, on MongoDB."""
    return config_name == CONFIG_NAME and db_type is DatabaseType.MONGODB


def decrypts(fields: Iterable[str]) -> bool:
    """Whether reading ``fields`` decrypts the records, as the reference decides: a field that
    is ``document`` or ``name``, or a dotted path (the wildcard reads every field)."""
    return any(f in ("document", "name", "*") or "." in f for f in fields)


def searched(filters: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The filtered fields (of all tables, ``{table: {field: condition}}``) that compare search
    hashes, in the order given."""
    return [
        field for conditions in filters.values() for field in conditions if field in SEARCH_FIELDS
    ]


def missing_keys(
    tables: Mapping[str, Iterable[str]],
    filters: Mapping[str, Mapping[str, Any]],
    *,
    hash_key: bool,
    encrypt_key: bool,
) -> list[str]:
    """The settings a job on the datasource needs and lacks: the hash key when it filters on
    a searched field, the encryption key when it decrypts."""
    missing = []
    if not hash_key and searched(filters):
        missing.append(HASH_KEY_SETTING)
    if not encrypt_key and any(decrypts(fields) for fields in tables.values()):
        missing.append(ENCRYPT_KEY_SETTING)
    return missing


def missing_key_entry(setting: str) -> CatalogueEntry:
    """The error of a job that needs ``setting`` (one of the two keys) and lacks it."""
    if setting == ENCRYPT_KEY_SETTING:
        return catalogue.CRM_ENCRYPT_KEY_MISSING
    return catalogue.CRM_HASH_KEY_MISSING
