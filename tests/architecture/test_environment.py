"""The process environment is read in one place: the settings reader. Everything else takes
parsed settings (or a mapping the settings module hands over)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.test_boundaries import LAYERS, ROOT

READER = ROOT / "entrypoints" / "settings_reader.py"


def environment_reads(path: Path) -> list[int]:
    """Lines that touch ``os.environ``, ``os.getenv`` or ``os.environb``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "environb", "getenv"}:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(a.name in {"environ", "environb", "getenv"} for a in node.names):
                lines.append(node.lineno)
    return lines


def test_only_the_settings_reader_reads_the_process_environment():
    found = {
        str(path.relative_to(ROOT)): lines
        for layer in LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path != READER and (lines := environment_reads(path))
    }
    assert found == {}
    assert environment_reads(READER), "the reader itself reads it"


def test_the_check_catches_a_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom os import getenv\nvalue = os.environ.get('X')\n")
    assert environment_reads(sample) == [2, 3]
