"""Every ``FET-`` code, pinned against the reference (§2.2.2 and §5.9), unique, and written down
in one place: ``domain/error_catalogue.py``.

The expected tables below are copied from the reference, not from the product code, so a change
to a code, its status or its title fails here until it is made on purpose.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections import defaultdict
from pathlib import Path

import pytest

from domain.error_catalogue import CATALOGUE, CatalogueEntry
from domain.errors import FetcherError, InvalidTransition
from entrypoints.http.errors import status_of

ROOT = Path(__file__).resolve().parents[3]
LAYERS = ("domain", "application", "adapters", "entrypoints")
CATALOGUE_FILE = ROOT / "domain" / "error_catalogue.py"
CODE = re.compile(r"FET-\d{4}")

# Reference §2.2.2: code -> (HTTP status, the titles it is used with).
REFERENCE = {
    "FET-0001": (400, {"Invalid payload", "Bad Request"}),
    "FET-0002": (500, {"Internal Server Error"}),
    "FET-0003": (503, {"Service Unavailable"}),
    "FET-0004": (409, {"Conflict"}),
    "FET-0005": (404, {"Not Found"}),
    "FET-0400": (400, {"Unexpected Fields in the Request"}),
    "FET-0401": (400, {"Invalid Data Request", "Invalid Filter References"}),
    "FET-0402": (
        400,
        {"Missing Fields in Request", "Missing Required Field", "Invalid Field Value"},
    ),
    "FET-0403": (400, {"Invalid header"}),
    "FET-0404": (400, {"Invalid Path Parameter"}),
    "FET-0405": (400, {"Invalid Query Parameter"}),
    "FET-0406": (400, {"Pagination Limit Exceeded"}),
    "FET-0407": (400, {"Invalid Sort Order"}),
    "FET-0408": (400, {"Invalid Date Format Error"}),
    "FET-0409": (400, {"Invalid Final Date Error"}),
    "FET-0410": (400, {"Invalid Metadata Nesting"}),
    "FET-0411": (400, {"Metadata Value Length Exceeded"}),
    "FET-0412": (400, {"Metadata Key Length Exceeded"}),
    "FET-0413": (400, {"Invalid SSL Mode"}),
    "FET-0414": (400, {"Forbidden Host"}),
    "FET-1001": (404, {"Entity Not Found"}),
    "FET-1002": (409, {"Conflict"}),
    "FET-1013": (409, {"Product Has Connections"}),
    "FET-1014": (400, {"Connection Not Assigned"}),
    "FET-1015": (409, {"Connection Already Assigned"}),
    "FET-1016": (400, {"Product Mismatch"}),
    "FET-1020": (400, {"No Connections Found", "Missing Data Source", "Missing Data Source Table"}),
    "FET-1021": (409, {"Job In Progress"}),
    "FET-1040": (400, {"Connection Down"}),
    "FET-1060": (422, {"Schema validation failed"}),
    "FET-1061": (400, {"Validation Limit Exceeded"}),
    "FET-1062": (400, {"No Connections Found"}),
    "FET-1080": (400, {"Tenant Context Required"}),
    "FET-1081": (404, {"Tenant Not Found"}),
    "FET-1082": (503, {"Tenant Service Unavailable"}),
}

# Reference §2.2.2, literal default messages (``%v``/``%s`` where the reference substitutes).
REFERENCE_MESSAGES = {
    "FET-0001": {
        "unable to parse request body",
        "empty request body",
        "The server could not understand the request due to malformed syntax. Please check the "
        "listed fields and try again.",
        "The server could not understand the request due to malformed syntax. Please check the "
        "request and try again.",
    },
    "FET-0002": {
        "The server encountered an unexpected error. Please try again later or contact support."
    },
    "FET-0003": {
        "The server is currently unable to handle the request due to temporary overloading or "
        "maintenance of the server. Please try again later."
    },
    "FET-0004": {
        "The request could not be completed due to a conflict with the current state of the "
        "resource. Please resolve the conflict and try again."
    },
    "FET-0005": {
        "The requested resource could not be found. Please check the request and try again."
    },
    "FET-0401": {
        "The request contains invalid data. Please check the request payload and try again."
    },
    "FET-0402": {
        "Your request is missing one or more required fields. Please refer to the documentation "
        "to ensure all necessary fields are included in your request."
    },
    "FET-0403": {
        "One or more header values are missing or incorrectly formatted. Please verify required "
        "headers %v."
    },
    "FET-0404": {
        "Path parameters is in an incorrect format. Please check the following parameter %v and "
        "ensure they meet the required format before trying again."
    },
    "FET-0405": {
        "One or more query parameters are in an incorrect format. Please check the following "
        "parameters '%v' and ensure they meet the required format before trying again."
    },
    "FET-0406": {
        "The pagination limit exceeds the maximum allowed of %v items per page. Please verify "
        "the limit and try again."
    },
    "FET-0407": {
        "The 'sort_order' field must be 'asc' or 'desc'. Please provide a valid sort order and "
        "try again."
    },
    "FET-0408": {
        "The 'initialDate', 'finalDate', or both are in the incorrect format. Please use the "
        "'yyyy-mm-dd' format and try again."
    },
    "FET-0409": {
        "The 'finalDate' cannot be earlier than the 'initialDate'. Please verify the dates and "
        "try again."
    },
    "FET-0413": {
        "Invalid SSL mode. The provided SSL mode '%v' is not supported. Please use a valid SSL "
        "mode for this database type."
    },
    "FET-0414": {"Host is not a valid external database endpoint"},
    "FET-1001": {
        "It was not possible to find the %v entity during the requested flow. Please review the "
        "data provided in the request."
    },
    "FET-1002": {
        "An entity of type %v with the same unique attributes already exists. Please use "
        "different values to avoid conflicts and review the data provided in the request."
    },
    "FET-1014": {"The connection is not assigned to any product."},
    "FET-1015": {"The %v is already assigned to a product and cannot be reassigned."},
    "FET-1016": {"One or more datasources do not belong to the specified product."},
    "FET-1020": {
        "No connections configured for the requested datasources",
        "No connection configured for datasource '%v'",
    },
    "FET-1021": {
        "The operation cannot be completed because there are active jobs for this connection."
    },
    "FET-1040": {
        "The database connection is not available. Please check the connection configuration "
        "and try again."
    },
    "FET-1060": {"Schema validation found inconsistencies."},
    "FET-1062": {"No connections configured for the requested datasources"},
}

# Reference §5.9: worker codes, never an HTTP answer, only inside failure texts.
WORKER = {
    "FET-0050": {"Invalid Message"},
    "FET-0051": {"Invalid Message"},
    "FET-0052": {"Invalid Message"},
    "FET-0053": {"Invalid Message"},
    "FET-0054": {"Connection Not Found"},
    "FET-0055": {"Unsupported Operation"},
    "FET-0056": {"Encryption Not Configured"},
    "FET-0057": {"CRM Crypto Not Configured"},
    "FET-0058": {"CRM Crypto Not Configured"},
    "FET-0059": {"Collection Not Found"},
    "FET-0060": {"Data Serialization Failed", "Job Event Configuration Error"},
    "FET-0061": {"HMAC Computation Failed"},
    "FET-0062": {"Cipher Creation Failed"},
    "FET-0063": {"Cipher Creation Failed"},
    "FET-0064": {"Cipher Initialization Failed"},
    "FET-0065": {"Decryption Failed"},
    "FET-0066": {"Tenant Path Resolution Failed"},
    "FET-0067": {"Job Not Found"},
    "FET-0068": {"Result Integrity Mismatch"},
}

# This service's own codes, in gaps the reference leaves. FET-1041..1043 stand for the
# reference's integer-coded bodies of the same status and title (§2.2.2, "Non-FET shape-D");
# FET-0006..0009 for its plain-text auth answers (§2.1.1), FET-0009 relayed with the status of
# the authorization service.
OWN = {
    "FET-0006": (401, "Unauthorized"),
    "FET-0007": (403, "Forbidden"),
    "FET-0008": (503, "Auth Service Unavailable"),
    "FET-0009": (500, "Auth Service Error"),
    "FET-1022": (409, "Invalid Job Transition"),
    "FET-1023": (500, "Extraction Failed"),
    # 502, not the reference's 500: the datasource failed, not Fetcher (docs/api/errors.md).
    "FET-1041": (502, "Database Connection Error"),
    "FET-1042": (500, "Schema Retrieval Error"),
    "FET-1043": (429, "Rate Limit Exceeded"),
}

# Refusals of the HTTP framework keep FET-0001 with the framework's status and reason as title.
FRAMEWORK = {
    ("FET-0001", "Method Not Allowed"),
    ("FET-0001", "Request Entity Too Large"),
    ("FET-0001", "Request Timeout"),
}


def _name(entry: CatalogueEntry) -> str:
    return f"{entry.code} {entry.title!r}"


@pytest.mark.parametrize("entry", CATALOGUE, ids=_name)
def test_each_code_has_the_reference_status_and_title(entry):
    if entry.code in OWN:
        assert entry.code not in REFERENCE and entry.code not in WORKER
        assert (status_of(entry), entry.title) == OWN[entry.code]
    elif entry.code in WORKER:
        assert entry.title in WORKER[entry.code]
    else:
        status, titles = REFERENCE[entry.code]
        assert status_of(entry) == status
        assert entry.title in titles or (entry.code, entry.title) in FRAMEWORK


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e.code in REFERENCE_MESSAGES], ids=_name)
def test_each_default_message_is_the_reference_text(entry):
    if (entry.code, entry.title) in FRAMEWORK:
        return
    as_reference = re.sub(r"\{\w+\}", "%v", entry.message)
    assert as_reference in REFERENCE_MESSAGES[entry.code]


def test_each_code_has_one_meaning():
    kinds: dict[str, set[object]] = defaultdict(set)
    for entry in CATALOGUE:
        kinds[entry.code].add(entry.kind)
    assert {code: k for code, k in kinds.items() if len(k) > 1} == {}
    variants = [(e.code, e.title, e.message) for e in CATALOGUE]
    assert len(variants) == len(set(variants))


def test_a_job_transition_has_its_own_code_apart_from_the_date_error():
    assert InvalidTransition.code == "FET-1022" and InvalidTransition.kind.value == "conflict"
    assert {e.title for e in CATALOGUE if e.code == "FET-0409"} == {"Invalid Final Date Error"}


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_error_class_takes_its_code_from_the_catalogue():
    for layer in LAYERS:
        package = importlib.import_module(layer)
        for module in pkgutil.walk_packages(package.__path__, f"{layer}."):
            importlib.import_module(module.name)
    classes = _subclasses(FetcherError) | {FetcherError}
    project = [c for c in classes if c.__module__.split(".")[0] in LAYERS]
    assert len(project) > 20
    for cls in project:
        assert cls.entry in CATALOGUE, cls
        assert (cls.code, cls.title, cls.kind) == (cls.entry.code, cls.entry.title, cls.entry.kind)


def code_literals(source: str) -> list[str]:
    """Every ``FET-nnnn`` written in a string that is not documentation (a docstring or any
    other string statement)."""
    tree = ast.parse(source)
    documentation = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        code
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in documentation
        for code in CODE.findall(node.value)
    ]


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('"""Raises FET-0401."""\nX = 1', []),
        ('def f():\n    """FET-0401 when bad."""', []),
        ('CODE = "FET-0401"', ["FET-0401"]),
        ('raise E("x", code="FET-1002")', ["FET-1002"]),
        ('text = f"FET-0413 - {mode}"', ["FET-0413"]),
        ('RANGE = "FET-04xx"', []),
    ],
)
def test_code_literal_scanner(source, found):
    assert code_literals(source) == found


def test_no_module_writes_a_code_outside_the_catalogue():
    offenders = {
        f"{path.relative_to(ROOT)}: {code}"
        for layer in LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path != CATALOGUE_FILE
        for code in code_literals(path.read_text())
    }
    assert offenders == set()
