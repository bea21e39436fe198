"""The errors reference is generated from the catalogue: every code the service can answer is
on it, with its status and what to do, and the page in the tree is the generated one."""

from __future__ import annotations

from pathlib import Path

from domain import error_catalogue as catalogue
from domain.error_catalogue import CATALOGUE, REMEDIES
from entrypoints.cli.errors_docs import ERRORS_PATH, markdown, status
from entrypoints.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


def test_the_errors_reference_is_generated_from_the_catalogue() -> None:
    """Run `fetcher errors --write` after changing the catalogue."""
    assert (ROOT / ERRORS_PATH).read_text() == markdown()


def test_every_code_has_a_row_with_its_status_and_what_to_do() -> None:
    page = markdown()
    for entry in CATALOGUE:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{entry.code}` |"))
        assert status(entry) in row
        assert REMEDIES[entry.code].split("`")[0][:40] in row
    assert set(REMEDIES) == {entry.code for entry in CATALOGUE}


def test_statuses_are_those_the_http_layer_answers() -> None:
    assert status(catalogue.MISSING_DATA_SOURCE) == "400"
    assert status(catalogue.CONNECTION_TEST_FAILED) == "502"
    assert status(catalogue.ENTITY_CONFLICT) == "409"
    assert status(catalogue.SCHEMA_VALIDATION_FAILED) == "422"
    assert status(catalogue.METHOD_NOT_ALLOWED) == "405"


def test_the_command_writes_the_page(tmp_path: Path) -> None:
    assert main(["errors", "--write", "--root", str(tmp_path)]) == 0
    assert (tmp_path / ERRORS_PATH).read_text() == markdown()
