"""docs/design/layout.md names every package and file group of the tree: each path it
names must exist, and every broker package must be named.

The doc's rule for paths: a backticked token with a ``/`` that starts at the repository's
top (``rust/``, ``python/``, ``broker_py/``, ...) is relative to the repository; any
other backticked file or folder name is relative to the folder in its table row's first
cell.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYOUT = REPO / "docs" / "design" / "layout.md"
TOP = ("rust/", "python/", "broker_py/", "tests/", "benches/", "scripts/", "docs/", ".ci/")
PATH_TOKEN = re.compile(r"`([\w./-]+)`")
NAMED_FILE = re.compile(r"[\w-]+(\.[\w-]+)*\.(py|rs|md|toml|sh|pyi)$")


def _tokens(text: str) -> list[str]:
    return [t for t in PATH_TOKEN.findall(text) if t.startswith(TOP) or NAMED_FILE.search(t)]


def _named_paths() -> list[tuple[str, Path]]:
    named: list[tuple[str, Path]] = []
    for line in LAYOUT.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if "|" in line else []
        base = REPO
        first = PATH_TOKEN.findall(cells[0]) if cells else []
        if first and first[0].endswith("/") and first[0].startswith(TOP):
            base = REPO / first[0]
        for token in _tokens(line):
            path = REPO / token if token.startswith(TOP) else base / token
            named.append((token, path))
    return named


def test_every_path_the_layout_doc_names_exists():
    named = _named_paths()
    assert len(named) > 100, "the layout doc should name the tree's packages and files"
    missing = sorted({token for token, path in named if not path.exists()})
    assert missing == [], f"docs/design/layout.md names paths that do not exist: {missing}"


def test_the_layout_doc_names_every_broker_package():
    named = {path.resolve() for _, path in _named_paths()}
    packages = sorted(
        p.parent.relative_to(REPO).as_posix() + "/"
        for p in (REPO / "broker_py").rglob("__init__.py")
        if p.parent != REPO / "broker_py"
    )
    unnamed = [p for p in packages if (REPO / p).resolve() not in named]
    assert unnamed == [], f"docs/design/layout.md does not name these packages: {unnamed}"
