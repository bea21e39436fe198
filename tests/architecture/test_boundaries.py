"""Import direction and the domain's standard-library-only rule, checked mechanically."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("domain", "application", "adapters", "entrypoints")
DOMAIN_ALLOWED = {"eventsourcing.domain"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def forbidden_in_domain(module: str) -> bool:
    top = module.split(".")[0]
    if top == "domain" or top == "__future__" or top in sys.stdlib_module_names:
        return False
    return not any(
        module == allowed or module.startswith(allowed + ".") for allowed in DOMAIN_ALLOWED
    )


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("dataclasses", False),
        ("domain.job", False),
        ("eventsourcing.domain", False),
        ("eventsourcing.persistence", True),
        ("eventsourcing", True),
        ("sqlalchemy", True),
        ("cryptography.hazmat", True),
        ("msgspec", True),
    ],
)
def test_allowlist_checker(module, forbidden):
    assert forbidden_in_domain(module) is forbidden


def test_domain_imports_only_stdlib_and_eventsourcing_domain():
    offenders = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in (ROOT / "domain").rglob("*.py")
        for module in imported_modules(path)
        if forbidden_in_domain(module)
    }
    assert offenders == set()


def test_application_uses_only_the_domain_part_of_eventsourcing():
    """import-linter cannot forbid subpackages of an external package; this does."""
    offenders = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in (ROOT / "application").rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] == "eventsourcing" and module not in DOMAIN_ALLOWED
    }
    assert offenders == set()


def test_layers_resolve_inside_the_repository():
    for layer in LAYERS:
        module = __import__(layer)
        assert Path(module.__file__).resolve().parent == ROOT / layer


def test_no_other_distribution_provides_a_layer():
    """The layers' names are generic (other distributions ship a ``domain`` or ``adapters``);
    in this environment only Fetcher may provide them."""
    providers = importlib.metadata.packages_distributions()
    assert {layer: sorted(set(providers.get(layer, []))) for layer in LAYERS} == {
        layer: ["fetcher"] for layer in LAYERS
    }


def test_the_installed_command_imports_this_checkouts_layers_from_anywhere(tmp_path):
    """What ``fetcher`` imports outside pytest (no ``pythonpath``, another working folder): the
    editable install's layers, which are this checkout's, or a regular install's files."""
    code = "import json, " + ", ".join(LAYERS) + "; print(json.dumps({m.__name__: m.__file__ "
    code += "for m in (" + ", ".join(LAYERS) + ")}))"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    installed = importlib.metadata.distribution("fetcher")
    owned = {Path(str(installed.locate_file(f))).resolve() for f in installed.files or ()}
    for layer, file in json.loads(result.stdout).items():
        path = Path(file).resolve()
        assert path.parent == ROOT / layer or path in owned, (layer, path)


def test_import_contracts_hold():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
