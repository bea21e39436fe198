"""The CRM plugin's side of the ``plugin_crm`` tests: documents shaped as the plugin writes them,
personal fields encrypted and search hashes made here with plain ``cryptography`` and ``hmac``,
independently of the product's code."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pymongo import AsyncMongoClient

HASH_SECRET = "crm-search-secret ✓"
AES_KEY = bytes(range(100, 132))


def encrypt(plain: str, key: bytes = AES_KEY) -> str:
    nonce = os.urandom(12)
    return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, plain.encode(), None)).decode()


def search(plain: str) -> str:
    return hmac.new(HASH_SECRET.encode(), plain.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Person:
    id: str
    kind: str
    document: str
    name: str
    email: str
    email2: str
    mobile: str
    phone: str
    account: str
    iban: str
    mother: str

    def stored(self) -> dict[str, Any]:
        return {
            "_id": self.id,
            "type": self.kind,
            "document": encrypt(self.document),
            "name": encrypt(self.name),
            "contact": {
                "primary_email": encrypt(self.email),
                "secondary_email": encrypt(self.email2),
                "mobile_phone": encrypt(self.mobile),
                "other_phone": encrypt(self.phone),
            },
            "banking_details": {"account": encrypt(self.account), "iban": encrypt(self.iban)},
            "natural_person": {"mother_name": encrypt(self.mother), "father_name": ""},
            "search": {
                "document": search(self.document),
                "name": search(self.name),
                "banking_details_account": search(self.account),
                "banking_details_iban": search(self.iban),
                "contact_primary_email": search(self.email),
                "contact_secondary_email": search(self.email2),
                "contact_mobile_phone": search(self.mobile),
                "contact_other_phone": search(self.phone),
            },
        }

    @property
    def plain(self) -> dict[str, str]:
        return {
            "document": self.document,
            "name": self.name,
            "contact.primary_email": self.email,
            "contact.secondary_email": self.email2,
            "contact.mobile_phone": self.mobile,
            "contact.other_phone": self.phone,
            "banking_details.account": self.account,
            "banking_details.iban": self.iban,
        }


def _person(n: int, org: str) -> Person:
    return Person(
        id=f"{org}-{n}", kind="NATURAL_PERSON" if n % 2 else "LEGAL_PERSON",
        document=f"{n:03d}.456.789-0{n}", name=f"Person {n} <&> Ünïcode", email=f"p{n}@a.example",
        email2=f"p{n}@b.example", mobile=f"+55 11 9{n:04d}", phone=f"+55 11 3{n:04d}",
        account=f"{n:06d}", iban=f"BR{n:02d}0000", mother=f"Mother {n}",
    )  # fmt: skip


ORG_A = [_person(1, "org-a"), _person(2, "org-a")]
ORG_B = [_person(3, "org-b")]
ALIAS = {"_id": "alias-1", "holder_id": "org-a-1", "account_id": "acc-1"}


async def write_crm_database(url: str, database: str) -> None:
    """Holders of two organisations (inserted out of ``_id`` order), aliases, and two
    collections no prefix covers, in ``database`` (replaced)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, directConnection=True)
    try:
        await client.drop_database(database)
        db = client[database]
        await db["holders_org-b"].insert_many([p.stored() for p in ORG_B])
        await db["holders_org-a"].insert_many([p.stored() for p in reversed(ORG_A)])
        await db["aliases_org-a"].insert_one(dict(ALIAS))
        await db["holdersx"].insert_one({"_id": 1, "type": "not a holder"})
        await db["other"].insert_one({"_id": 1})
    finally:
        await client.close()


async def drop_database(url: str, database: str) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, directConnection=True)
    try:
        await client.drop_database(database)
    finally:
        await client.close()
