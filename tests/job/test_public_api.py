"""One public front: every name perfsuite exports resolves, and the docs name only top-level names."""

from __future__ import annotations

import re
from pathlib import Path

import perfsuite

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_name_resolves():
    missing = [name for name in perfsuite.__all__ if getattr(perfsuite, name, None) is None]
    assert missing == []


def _resolves(dotted: str) -> bool:
    """perfsuite.a.b.c names a module or an attribute of one (perfsuite.testing.WorkloadContract)."""
    import importlib

    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


ENTRY_POINT_GROUPS = {"perfsuite.workloads", "perfsuite.probes"}  # group names, not modules


def test_every_dotted_perfsuite_name_in_the_docs_resolves():
    """A module path or name the README or a docs page mentions still exists: no stale path after a move."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        names = set(re.findall(r"(?<![.\w/-])perfsuite(?:\.[A-Za-z_]\w*)+", page.read_text())) - ENTRY_POINT_GROUPS
        assert sorted(n for n in names if not _resolves(n)) == [], page.name


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _imports(source: str) -> list[str]:
    """Every `import perfsuite...` / `from perfsuite... import ...` statement, joined across parentheses."""
    joined = re.sub(r"\(\s*([^)]*?)\s*\)", lambda m: " ".join(m.group(1).split()).rstrip(","), source, flags=re.S)
    return [line.strip() for line in joined.splitlines() if re.match(r"\s*(from perfsuite\b|import perfsuite\b)", line)]


def test_every_import_the_docs_and_examples_show_works():
    """What a reader copies from README.md, docs/ and examples/ imports: the public front holds (issue 19)."""
    statements = {stmt for page in _pages() for block in _code_blocks(page.read_text()) for stmt in _imports(block)}
    for example in sorted((ROOT / "examples").rglob("*.py")):
        statements |= set(_imports(example.read_text()))
    assert statements, "no perfsuite import found: the scan is broken"
    for stmt in sorted(statements):
        exec(stmt, {})  # raises ImportError naming what moved


def test_every_perfsuite_name_in_the_docs_code_exists():
    for page in _pages():
        for block in _code_blocks(page.read_text()):
            used = set(re.findall(r"(?<![.\w-])perfsuite\.([A-Za-z_]\w*)\b(?!\.\w)", block))
            assert {name for name in used if not hasattr(perfsuite, name)} == set(), page.name
