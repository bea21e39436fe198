"""A body that does not parse is answered with where and what, never with a secret it held."""

from __future__ import annotations

import pytest

from entrypoints.http.body_errors import invalid_fields, line_and_column, malformed_json
from tests.support.http import assert_error

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "offset", "expected"),
    [
        (b"{}", 0, (1, 1)),
        (b'{\n  "a": 1,,\n}', 11, (2, 10)),
        ('{"é": 1,,}'.encode(), 9, (1, 9)),
    ],
)
def test_line_and_column_count_lines_and_characters(body, offset, expected):
    assert line_and_column(body, offset) == expected


def test_malformed_json_gives_line_and_column_of_the_decoders_byte():
    body = b'{"configName": "x",\n "port": 5432,,}'
    message = malformed_json("JSON is malformed: object keys must be strings (byte 34)", body)
    assert message == (
        "unable to parse request body: invalid JSON at line 2, column 15: "
        "object keys must be strings"
    )


def test_a_value_under_a_secret_name_is_never_repeated():
    body = b'{"password": 12345678, "port": "5432"}'
    fields = invalid_fields(
        [
            {"message": "Expected `str | null`, got `int`", "key": "password", "source": "body"},
            {"message": "Expected `int`, got `str`", "key": "port", "source": "body"},
        ],
        body,
    )
    assert fields == {
        "password": "expected a string or null, got an integer",
        "port": 'expected an integer, got "5432"',
    }
    assert "12345678" not in str(fields)


def test_details_of_other_sources_than_the_body_are_not_fields():
    assert invalid_fields([{"message": "x", "key": "limit", "source": "query"}], b"{}") == {}


async def test_a_mapped_field_list_sent_as_a_string_names_its_path(client):
    body = {"dataRequest": {"mappedFields": {"pg": {"t": "a,b"}}}, "metadata": {"source": "x"}}
    error = assert_error(await client.post("/v1/fetcher", json=body), 400, "FET-0001")
    assert error["fields"] == {
        "dataRequest.mappedFields[...][...]": "expected an array, got a string"
    }
    assert error["message"].startswith("unable to parse request body: dataRequest.mappedFields")


async def test_invalid_json_on_a_later_line_names_that_line(client):
    response = await client.post(
        "/v1/fetcher", content=b'{\n  "dataRequest": {\n    "mappedFields": }\n}', headers=JSON
    )
    error = assert_error(response, 400, "FET-0001")
    assert error["message"].startswith("unable to parse request body: invalid JSON at line 3, ")


async def test_a_body_without_content_type_says_which_header_to_send(client):
    response = await client.post("/v1/fetcher", content=b'{"dataRequest": {}}')
    assert_error(
        response,
        400,
        "FET-0001",
        "unable to parse request body: the body must be JSON sent with the header "
        "Content-Type: application/json",
    )
