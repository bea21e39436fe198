"""MkDocs hook: pages other branches are writing, linked in the nav before they land.

`mkdocs build --strict` fails on a nav entry whose file does not exist. The pages named in
PENDING may be missing for a while (they land from other branches); until one exists its nav
entry is dropped and a link to it in a page is shown as its plain text, with a line in the build
log. Every other nav entry and link stays strict. Once all of
them have landed this list can be emptied (tests/docs/test_site_builds.py says which are still
missing).
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

PENDING: frozenset[str] = frozenset()

log = logging.getLogger("mkdocs.hooks.pending_pages")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)#\s]+\.md)(#[^)\s]*)?\)")
_missing: set[str] = set()


def missing_pending(docs_dir: Path) -> list[str]:
    """The pending pages not (yet) in ``docs_dir``."""
    return sorted(page for page in PENDING if not (docs_dir / page).is_file())


def _prune(items: list[Any], missing: set[str]) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            pruned = {}
            for title, value in item.items():
                if isinstance(value, list):
                    children = _prune(value, missing)
                    if children:
                        pruned[title] = children
                elif value not in missing:
                    pruned[title] = value
            if pruned:
                kept.append(pruned)
        elif item not in missing:
            kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    missing = missing_pending(Path(config["docs_dir"]))
    _missing.clear()
    _missing.update(missing)
    if missing and config["nav"]:
        log.info("pending pages not in docs/ yet, left out of the nav: %s", ", ".join(missing))
        config["nav"] = _prune(config["nav"], set(missing))
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if not _missing:
        return markdown
    here = posixpath.dirname(page.file.src_uri)

    def unlink(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(here, match.group(2)))
        return match.group(1) if target in _missing else match.group(0)

    return _LINK.sub(unlink, markdown)
