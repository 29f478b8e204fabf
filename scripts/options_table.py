"""Rewrite the options table in docs/options.md from perfsuite/core/options.py (the one table of options).

    python scripts/options_table.py            # rewrite it
    python scripts/options_table.py --check    # exit 1 if the page is stale

tests/unit/test_options.py fails when the page is stale, naming this script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfsuite.core.options import splice_table  # noqa: E402

PAGE = ROOT / "docs" / "options.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/options.md is not the generated table")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    fresh = splice_table(page)
    if args.check:
        return 0 if fresh == page else 1
    PAGE.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
