from __future__ import annotations

import hashlib

import pytest

from domain import gojson
from domain.errors import InvalidRequest, MissingFields
from domain.request import ExtractionRequest, canonical_json

SOURCE = {"source": "payments"}


def make(mapped, filters=None, metadata=SOURCE):
    return ExtractionRequest.create(mapped, filters, metadata)


@pytest.mark.parametrize(
    ("mapped", "message"),
    [
        ({}, "mappedFields cannot be empty"),
        ({"pg": {"t": []}}, "datasource must have at least one table with fields"),
        (
            {f"ds{i}": {"t": ["a"]} for i in range(11)},
            "Maximum 10 datasources allowed per job, got 11",
        ),
        (
            {"pg": {f"t{i}": ["a"] for i in range(21)}},
            "maximum 20 tables allowed per datasource, got 21 for 'pg'",
        ),
        (
            {"pg": {"t": [f"f{i}" for i in range(51)]}},
            "maximum 50 fields allowed per table, got 51 for 'pg.t'",
        ),
        ({"pg": {"t": ["*", "a"]}}, "the wildcard \"*\" must be the only field of 'pg.t'"),
        ({"pg": {"t": [" "]}}, "field name cannot be empty or whitespace-only in 'pg.t'"),
        ({"pg": {"a.b.c.d": ["x"]}}, "invalid table name 'a.b.c.d' in datasource 'pg'"),
    ],
)
def test_mapped_fields_rules(mapped, message):
    with pytest.raises(InvalidRequest) as caught:
        make(mapped)
    assert caught.value.code == "FET-0401"
    assert caught.value.message.startswith(message)


@pytest.mark.parametrize(
    ("metadata", "title", "message"),
    [
        (None, "Missing Required Field", "metadata is required and must contain 'source' field"),
        ({}, "Missing Required Field", "metadata.source is required for job notification routing"),
        ({"source": 3}, "Invalid Field Value", "metadata.source must be a non-empty string"),
        ({"source": "  "}, "Invalid Field Value", "metadata.source must be a non-empty string"),
    ],
)
def test_metadata_source_rules(metadata, title, message):
    with pytest.raises(MissingFields) as caught:
        make({"pg": {"t": ["a"]}}, metadata=metadata)
    assert (caught.value.code, caught.value.title, caught.value.message) == (
        "FET-0402",
        title,
        message,
    )


def test_filters_on_unknown_datasources_are_listed():
    with pytest.raises(InvalidRequest) as caught:
        make({"pg": {"t": ["a"]}}, {"x": {}, "y": {}})
    assert caught.value.title == "Invalid Filter References"
    assert caught.value.message == (
        "filter references unknown datasource 'x' not found in mappedFields; "
        "filter references unknown datasource 'y' not found in mappedFields"
    )


@pytest.mark.parametrize(
    ("condition", "fragment"),
    [
        ({"between": [1]}, "between operator must have exactly 2 values, got 1"),
        ({"gt": [1, 2]}, "gt operator must have exactly 1 value, got 2"),
        ({"regex": ["a"]}, "unknown operator 'regex'"),
        ({"like": [3]}, "like operator takes exactly 1 string pattern"),
        ({"eq": [{"a": 1}]}, "takes scalar values"),
    ],
)
def test_filter_conditions_are_checked(condition, fragment):
    with pytest.raises(InvalidRequest) as caught:
        make({"pg": {"t": ["a"]}}, {"pg": {"t": {"a": condition}}})
    assert fragment in caught.value.message
    assert "'pg.t.a'" in caught.value.message


def test_canonical_json_follows_go_rules():
    mapped = {"pg": {"b": ["y", "x"], "a": ["z"]}}
    filters = {"pg": {"a": {"z": {"like": ["%<x>&%"], "eq": [1, 2.5], "in": []}}}}
    metadata = {"source": "payments", "n": 1e21, "small": 1e-7, "big": 12345678901234567890}
    text = canonical_json(mapped, filters, metadata).decode()
    assert text == (
        '{"dataRequest":{"mappedFields":{"pg":{"a":["z"],"b":["y","x"]}},'
        '"filters":{"pg":{"a":{"z":{"eq":[1,2.5],"like":["%\\u003cx\\u003e\\u0026%"]}}}}},'
        '"metadata":{"big":12345678901234567000,"n":1e+21,"small":1e-7,"source":"payments"}}'
    )
    request = make(mapped, filters, metadata)
    assert request.request_hash == hashlib.sha256(text.encode()).hexdigest()


def test_hash_is_independent_of_key_order_but_not_of_field_order():
    a = make({"pg": {"t": ["a", "b"]}, "my": {"u": ["c"]}})
    b = make({"my": {"u": ["c"]}, "pg": {"t": ["a", "b"]}})
    c = make({"pg": {"t": ["b", "a"]}, "my": {"u": ["c"]}})
    assert a.request_hash == b.request_hash != c.request_hash


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3.0, "3"),
        (0.1, "0.1"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (-2.5, "-2.5"),
        (123.456, "123.456"),
    ],
)
def test_go_float_formatting(value, text):
    assert gojson.encode_float(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", '"plain"'),
        ("<a href='x'>&", "\"\\u003ca href='x'\\u003e\\u0026\""),
        ("line\u2028para\u2029", '"line\\u2028para\\u2029"'),
        ("é😀", '"é😀"'),
        ("lone \ud800 surrogate", '"lone \ufffd surrogate"'),
        (
            'quote " back \\ nl \n tab \t nul \x00 del \x7f',
            '"quote \\" back \\\\ nl \\n tab \\t nul \\u0000 del \x7f"',
        ),
        ("", '""'),
    ],
)
def test_go_string_encoding(value, text):
    """As Go's ``json.Marshal`` writes these strings."""
    assert gojson.encode_string(value) == text
