"""The documentation site builds offline in strict mode: every nav entry, link and anchor
resolves (MkDocs' own checks), the consumer guide includes the example file, and the README
stays a short entry point whose links lead to files that exist."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def build(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site.parent)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    result = build(out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_site_builds_in_strict_mode(site: Path):
    for page in ("index.html", "guides/consumers/index.html", "search/search_index.json"):
        assert (site / page).is_file(), page


def test_the_consumer_guide_includes_the_example_file_verbatim(site: Path):
    html = (site / "guides/consumers/index.html").read_text()
    # the snippet is included, not a `--8<--` line left as text
    assert "--8&lt;--" not in html and "--8<--" not in html
    assert "verify_signature" in html and "open_result" in html


def test_a_broken_link_fails_the_build(tmp_path: Path):
    """The strict build is what checks links: prove it fails on one (on a copy of the docs)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    (copy / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    subprocess.run(["cp", "-r", str(DOCS), str(copy / "docs")], check=True)
    page = copy / "docs" / "concepts.md"
    page.write_text(page.read_text() + "\nSee [nothing](no-such-page.md).\n")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "s")],
        cwd=copy,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode != 0
    assert "no-such-page.md" in result.stdout + result.stderr


def load_hook():
    spec = importlib.util.spec_from_file_location("pending_pages", DOCS / "_hooks/pending_pages.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_listed_pending_pages_may_be_missing():
    """The hook tolerates the absence of the pages other branches write, and nothing else:
    every other nav entry of mkdocs.yml names a file that exists."""
    hook = load_hook()
    nav_pages = re.findall(r":\s+([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    missing = [p for p in nav_pages if not (DOCS / p).is_file()]
    assert set(missing) <= hook.PENDING, missing


def test_the_readme_is_short_and_links_to_what_exists():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 13_000
    assert readme.index("make run") < 400 and readme.index("make test") < 600
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), target
    assert "§" not in readme  # no reference section numbers nobody can follow
