"""Which datasource takes the CRM plugin's path, and which keys a job on it needs."""

from __future__ import annotations

from domain.connection import DatabaseType
from domain.crm import ENCRYPT_KEY_SETTING, HASH_KEY_SETTING, CrmKeys, decrypts, is_crm


def test_only_the_exact_name_on_mongodb_takes_the_path():
    assert is_crm("plugin_crm", DatabaseType.MONGODB)
    assert not is_crm("plugin_crm", DatabaseType.POSTGRESQL)
    assert not is_crm("Plugin_CRM", DatabaseType.MONGODB)
    assert not is_crm("plugin_crm2", DatabaseType.MONGODB)


def test_document_name_a_dotted_field_or_the_wildcard_decrypt():
    assert decrypts(["document"]) and decrypts(["name"]) and decrypts(["contact.primary_email"])
    assert decrypts(["*"])
    assert not decrypts(["_id", "type", "natural_person", "documents"])


def test_the_keys_a_job_needs_are_those_it_uses():
    none = CrmKeys()
    assert none.missing({"holders": ["_id", "type"]}, {}) == []
    assert none.missing({"holders": ["name"]}, {}) == [ENCRYPT_KEY_SETTING]
    filters = {"holders": {"contact.other_phone": {"eq": ["1"]}, "type": {"eq": ["x"]}}}
    assert none.missing({"holders": ["_id"]}, filters) == [HASH_KEY_SETTING]
    assert none.missing({"holders": ["_id"]}, {"holders": {"type": {"eq": ["x"]}}}) == []
    both = CrmKeys(hash_key=b"k", encrypt_key=bytes(32))
    assert both.missing({"holders": ["*"]}, filters) == []
    assert "k'" not in repr(both) and "\\x00" not in repr(both)
