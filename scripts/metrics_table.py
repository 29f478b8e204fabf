"""Rewrite the metrics table in docs/metrics.md from perfsuite/core/metrics.py (the one table of metrics).

``--check`` exits 1 when the page is stale instead of writing it (tests/unit/test_metrics.py checks it too).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfsuite.core import metrics

PAGE = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
START, END = "<!-- metrics-table:start -->\n", "<!-- metrics-table:end -->"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/metrics.md is stale; write nothing")
    args = parser.parse_args()
    page = PAGE.read_text(encoding="utf-8")
    head, _, rest = page.partition(START)
    _, _, tail = rest.partition(END)
    fresh = f"{head}{START}{metrics.render_table()}{END}{tail}"
    if args.check:
        return 0 if fresh == page else 1
    if fresh != page:
        PAGE.write_text(fresh, encoding="utf-8")
        print(f"wrote {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
