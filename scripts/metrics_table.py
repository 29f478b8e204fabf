"""Rewrite the generated tables of docs/ from their one source: the metrics in docs/metrics.md from
perfsuite/core/metrics.py, the kinds of host-device wait in docs/syncs.md from perfsuite/probes/synckinds.py.

``--check`` exits 1 when a page is stale instead of writing it (tests/unit/test_metrics.py and
tests/unit/test_sync_kinds.py check them too).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from perfsuite.core import metrics
from perfsuite.probes import synckinds

DOCS = Path(__file__).resolve().parents[1] / "docs"
# page -> (marker name, the table's renderer)
TABLES: dict[Path, tuple[str, Callable[[], str]]] = {
    DOCS / "metrics.md": ("metrics-table", metrics.render_table),
    DOCS / "syncs.md": ("sync-kinds", synckinds.render_table),
}


def fresh(page: Path) -> tuple[str, str]:
    """(the page as it is, the page with its table regenerated)."""
    name, render = TABLES[page]
    start, end = f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"
    text = page.read_text(encoding="utf-8")
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    return text, f"{head}{start}{render()}{end}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is stale; write nothing")
    args = parser.parse_args()
    stale = 0
    for page in TABLES:
        now, regenerated = fresh(page)
        if now == regenerated:
            continue
        stale += 1
        if not args.check:
            page.write_text(regenerated, encoding="utf-8")
            print(f"wrote {page}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
