"""MongoDB query documents for the ten filter operators: composition, typed values, errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from bson import Decimal128, ObjectId

from adapters.datasources.mongodb.statements import like_regex, mongo_filter
from domain.errors import InvalidRequest

TYPES = {
    "_id": "objectId",
    "n": "int",
    "big": "long",
    "ratio": "double",
    "amount": "decimal",
    "active": "bool",
    "name": "string",
    "at": "date",
    "ref": "uuid",
    "doc": "object",
    "any": "mixed",
}
OID = "65a0000000000000000000a1"


def build(filters: dict[str, dict[str, tuple[Any, ...]]]) -> dict[str, Any]:
    return mongo_filter(filters, TYPES, where=lambda field: f"'people.{field}' of database 'crm'")


# --- one operator at a time -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"n": {"eq": (1,)}}, {"n": {"$eq": 1}}),
        ({"n": {"eq": (1, 2)}}, {"n": {"$in": [1, 2]}}),
        ({"n": {"eq": (None,)}}, {"n": {"$eq": None}}),
        ({"n": {"eq": (None, 3)}}, {"n": {"$in": [3, None]}}),
        ({"n": {"in": (1,)}}, {"n": {"$in": [1]}}),
        ({"n": {"in": (1, None)}}, {"n": {"$in": [1, None]}}),
        ({"n": {"nin": (1, 2)}}, {"n": {"$nin": [1, 2, None]}}),
        ({"n": {"ne": (1,)}}, {"n": {"$nin": [1, None]}}),
        ({"n": {"ne": (None,)}}, {"n": {"$nin": [None]}}),
        ({"n": {"gt": (1,)}}, {"n": {"$gt": 1}}),
        ({"n": {"gte": (1,)}}, {"n": {"$gte": 1}}),
        ({"n": {"lt": (1,)}}, {"n": {"$lt": 1}}),
        ({"n": {"lte": (1,)}}, {"n": {"$lte": 1}}),
        ({"n": {"between": (1, 5)}}, {"n": {"$gte": 1, "$lte": 5}}),
        (
            {"name": {"like": ("a%",)}},
            {"name": {"$regex": r"^a.*(?![\s\S])", "$options": "s"}},
        ),
        ({"n": {"eq": ()}}, {}),
    ],
)
def test_each_operator_becomes_its_query_document(
    filters: dict[str, dict[str, tuple[Any, ...]]], expected: Any
) -> None:
    assert build(filters) == expected


# --- composition ------------------------------------------------------------------------------


def test_between_does_not_overwrite_gte() -> None:
    query = build({"n": {"gte": (3,), "between": (1, 5)}})
    assert query == {"n": {"$gte": 3}, "$and": [{"n": {"$gte": 1, "$lte": 5}}]}


def test_eq_with_several_values_and_in_both_apply() -> None:
    query = build({"n": {"eq": (1, 2), "in": (2, 3)}})
    assert query == {"n": {"$in": [1, 2]}, "$and": [{"n": {"$in": [2, 3]}}]}


def test_single_eq_is_kept_beside_other_operators() -> None:
    query = build({"n": {"eq": (2,), "gt": (1,), "lt": (5,)}})
    assert query == {"n": {"$eq": 2, "$gt": 1, "$lt": 5}}


def test_ne_with_several_values_and_nin_both_apply() -> None:
    query = build({"n": {"ne": (1, 2), "nin": (3,)}})
    assert query == {"n": {"$nin": [3, None]}, "$and": [{"n": {"$nin": [1, 2, None]}}]}


def test_operators_of_different_fields_are_anded() -> None:
    query = build({"n": {"gt": (1,)}, "active": {"eq": (True,)}})
    assert query == {"n": {"$gt": 1}, "active": {"$eq": True}}


def test_every_operator_on_one_field_at_once() -> None:
    query = build(
        {
            "n": {
                "eq": (1, 2, 3), "gt": (0,), "gte": (1,), "lt": (9,), "lte": (8,),
                "between": (0, 7), "in": (1, 2), "nin": (5,), "ne": (6,), "like": ("%",),
            }
        }
    )  # fmt: skip
    assert query == {
        "n": {"$in": [1, 2, 3], "$gt": 0, "$gte": 1, "$lt": 9, "$lte": 8, "$nin": [5, None]},
        "$and": [
            {"n": {"$gte": 0, "$lte": 7}},
            {"n": {"$in": [1, 2]}},
            {"n": {"$nin": [6, None]}},
            {
                "$expr": {
                    "$regexMatch": {
                        "input": {"$toString": "$n"},
                        "regex": r"^.*(?![\s\S])",
                        "options": "s",
                    }
                }
            },
        ],
    }


# --- values converted by the sampled field type -----------------------------------------------


def test_object_id_strings_become_object_ids() -> None:
    assert build({"_id": {"eq": (OID,)}}) == {"_id": {"$eq": ObjectId(OID)}}
    assert build({"_id": {"in": (OID, OID.upper())}}) == {
        "_id": {"$in": [ObjectId(OID), ObjectId(OID)]}
    }


def test_iso_dates_become_utc_datetimes() -> None:
    query = build({"at": {"gte": ("2024-01-15",), "lt": ("2024-02-01T05:00:00+05:00",)}})
    assert query == {
        "at": {
            "$gte": datetime(2024, 1, 15, tzinfo=UTC),
            "$lt": datetime(2024, 2, 1, tzinfo=UTC),
        }
    }


def test_date_only_upper_bound_of_between_is_the_end_of_that_day() -> None:
    assert build({"at": {"between": ("2024-01-01", "2024-01-31")}}) == {
        "at": {
            "$gte": datetime(2024, 1, 1, tzinfo=UTC),
            "$lte": datetime(2024, 1, 31, 23, 59, 59, 999000, tzinfo=UTC),
        }
    }
    exact = build({"at": {"between": ("2024-01-01", "2024-01-31T12:00:00Z")}})
    assert exact["at"]["$lte"] == datetime(2024, 1, 31, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("n", "20", 20),
        ("n", 20.0, 20),
        ("n", 2.5, 2.5),
        ("n", "2.5", 2.5),
        ("big", "-9007199254740993", -9007199254740993),
        ("ratio", "1e3", 1000.0),
        ("amount", "12.50", Decimal128("12.50")),
        ("amount", 0.1, Decimal128("0.1")),
        ("amount", 3, Decimal128("3")),
        ("active", "TRUE", True),
        ("active", 0, False),
        ("name", 42, "42"),
        ("name", 1.5, "1.5"),
        ("ref", "00000000-0000-0000-0000-000000000004", UUID(int=4)),
        ("doc", "as is", "as is"),
        ("any", 7, 7),
    ],
)
def test_values_are_converted_by_field_type(field: str, value: Any, expected: Any) -> None:
    converted = build({field: {"eq": (value,)}})[field]["$eq"]
    assert converted == expected
    assert type(converted) is type(expected)


@pytest.mark.parametrize(
    ("filters", "fragment"),
    [
        ({"_id": {"eq": ("not-an-id",)}}, "operator 'eq' expects an ObjectId"),
        ({"_id": {"eq": (12,)}}, "operator 'eq' expects an ObjectId"),
        ({"at": {"lt": ("31/01/2024",)}}, "operator 'lt' expects an ISO 8601 date or timestamp"),
        ({"at": {"between": ("2024-01-01", "soon")}}, "operator 'between' expects an ISO 8601"),
        ({"n": {"gt": ("ten",)}}, "operator 'gt' expects a number for field type 'int'"),
        ({"n": {"eq": (True,)}}, "operator 'eq' expects a number"),
        ({"amount": {"gte": ("1,50",)}}, "operator 'gte' expects a decimal number"),
        ({"active": {"eq": ("maybe",)}}, "operator 'eq' expects a boolean"),
        ({"name": {"eq": (True,)}}, "operator 'eq' expects a string"),
        ({"ref": {"in": ("nope",)}}, "operator 'in' expects a UUID"),
        ({"n": {"gt": (None,)}}, "operator 'gt' does not accept null"),
        ({"n": {"gt": (1, 2)}}, "operator 'gt' must have exactly 1 value, got 2"),
        ({"n": {"between": (1,)}}, "operator 'between' must have exactly 2 values, got 1"),
        ({"name": {"like": (1,)}}, "operator 'like' takes exactly 1 string pattern"),
        ({"name": {"like": ("a\\",)}}, "operator 'like' pattern must not end with the escape"),
        ({"n": {"near": (1,)}}, "unknown operator 'near'"),
    ],
)
def test_bad_values_are_invalid_requests_naming_field_and_operator(
    filters: dict[str, dict[str, tuple[Any, ...]]], fragment: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        build(filters)
    assert caught.value.code == "FET-0401"
    field = next(iter(filters))
    assert caught.value.message.startswith(f"filter on 'people.{field}' of database 'crm': ")
    assert fragment in caught.value.message


# --- like -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        ("abc", r"^abc(?![\s\S])"),
        ("a%", r"^a.*(?![\s\S])"),
        ("%a", r"^.*a(?![\s\S])"),
        ("a_c", r"^a.c(?![\s\S])"),
        ("a.b(c)+", r"^a\.b\(c\)\+(?![\s\S])"),
        ("100\\%", r"^100%(?![\s\S])"),
        ("a\\_b", r"^a_b(?![\s\S])"),
        ("back\\\\slash", r"^back\\slash(?![\s\S])"),
        ("trailing\\", r"^trailing\\(?![\s\S])"),
        ("^$[x]|{2}", r"^\^\$\[x\]\|\{2\}(?![\s\S])"),
    ],
)
def test_like_patterns_become_escaped_anchored_regexes(pattern: str, regex: str) -> None:
    assert like_regex(pattern) == regex


def test_like_is_case_sensitive_and_has_no_i_option() -> None:
    condition = build({"name": {"like": ("Al%",)}})["name"]
    assert "i" not in condition["$options"]
    assert re.match(condition["$regex"], "alpha") is None


TEXTS = ["abc", "ABC", "a.c", "a\nc", "abc\n", "a%c", "a_c", "a\\c", "xabcx", "", "a(b)c", "ünï😀"]
# What SQL LIKE selects from TEXTS, written out by hand: "%" any run of characters (newlines
# too), "_" exactly one, "\\" makes the next character literal, case-sensitive, whole string.
LIKE_SELECTS = {
    "abc": {"abc"},
    "a_c": {"abc", "a.c", "a\nc", "a%c", "a_c", "a\\c"},
    "a%": {"abc", "a.c", "a\nc", "abc\n", "a%c", "a_c", "a\\c", "a(b)c"},
    "%c": {"abc", "a.c", "a\nc", "a%c", "a_c", "a\\c", "a(b)c"},
    "%b%": {"abc", "abc\n", "xabcx", "a(b)c"},
    "a\\%c": {"a%c"},
    "a\\_c": {"a_c"},
    "a\\\\c": {"a\\c"},
    "a(b)c": {"a(b)c"},
    "_n%": {"ünï😀"},
    "%": set(TEXTS),
}


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("pattern", list(LIKE_SELECTS))
def test_like_regex_means_what_like_means(pattern: str, text: str) -> None:
    found = re.match(like_regex(pattern), text, flags=re.DOTALL) is not None
    assert found == (text in LIKE_SELECTS[pattern])
