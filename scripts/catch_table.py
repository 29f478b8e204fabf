"""Generate the catch table from the fault catalog and the recorded self-test, wherever its markers are.

    python scripts/catch_table.py --run [--aa 5]     # run the self-test, record it, rewrite the table
    python scripts/catch_table.py --run --faults A B # run only these faults (and their references, A/A included)
    python scripts/catch_table.py                   # rewrite the table from the recorded results
    python scripts/catch_table.py --check           # exit 1 if the page's table is not the generated one

Without --run, the recorded results must agree with the code: every sync site they
recorded in this repository's files must still hold its call at its line
(perfsuite.tools.catch_sites). If not, both the check and the rewrite exit 1 naming
each stale site; re-record those faults with ``--run --faults NAME...``.

The self-test (perfsuite.tools.catch.self_test) runs each reference once, each fault
once, and ``--aa`` more runs of each unchanged reference; the Results go to
tests/faults/data/catch_results.json. Every row is the shipped verdict
engine's judgement of those recorded Results, re-made on each rewrite. The table sits
between ``<!-- catch-table:start -->`` and ``<!-- catch-table:end -->``, in the first of
docs/*.md and README.md that holds them (docs/catch.md when none does).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfsuite.core.tmpfiles import write_text_atomic  # noqa: E402
from perfsuite.tools.catch import (  # noqa: E402
    START,
    CatchReport,
    current_table,
    rejudge,
    render_table,
    self_test,
    splice,
)
from perfsuite.tools.catch_sites import stale_sites  # noqa: E402

RESULTS = ROOT / "tests" / "faults" / "data" / "catch_results.json"
CATCH_PAGE = ROOT / "docs" / "catch.md"


def table_page(root: Path = ROOT) -> Path:
    """The page whose catch-table markers hold the table: the first of docs/*.md, then README.md."""
    for path in [*sorted((root / "docs").glob("*.md")), root / "README.md"]:
        if path.is_file() and START in path.read_text(encoding="utf-8"):
            return path
    return root / "docs" / "catch.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the self-test first and record its results")
    parser.add_argument("--aa", type=int, default=5, help="A/A runs per reference with --run (default 5)")
    parser.add_argument(
        "--faults", nargs="*", help="with --run: only these faults (default: all); updates their rows of the record"
    )
    parser.add_argument("--device", default="cpu", help="with --run: cpu or cuda")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page holds another table")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--page", type=Path, default=None, help="the markdown page holding the table (default: where the markers are)"
    )
    args = parser.parse_args(argv)
    page = args.page or table_page()

    if args.run:
        cache = os.environ.get("PERFSUITE_CACHE")
        report = self_test(
            args.faults,
            device=args.device,
            aa_runs=args.aa,
            cache_dir=Path(cache) if cache else None,
            log=lambda s: print(s, file=sys.stderr, flush=True),
        )
        if args.faults and args.results.is_file():  # a partial run updates the recorded one
            recorded = CatchReport.load(args.results)
            recorded.catches.update(report.catches)
            recorded.aa.update(report.aa)
            recorded.references.update(report.references)
            recorded.results.update(report.results)
            report = recorded
        report.save(args.results)
    if not args.results.is_file():
        print(f"no recorded results at {args.results}; run `python scripts/catch_table.py --run`", file=sys.stderr)
        return 1
    report = rejudge(CatchReport.load(args.results))
    stale = stale_sites(report.results, ROOT)
    if stale:
        keys = {line.split(":", 2)[0] + ":" + line.split(":", 2)[1].split(" ")[0] for line in stale}
        faults = sorted(k.split(":")[1] for k in keys if k.startswith("fault:"))
        rerun = "--run" if len(faults) < len(keys) else f"--run --faults {' '.join(faults)}"
        print(
            f"{args.results.name} records call sites the code no longer holds:\n  "
            + "\n  ".join(stale)
            + f"\nre-record them: `python scripts/catch_table.py {rerun}`",
            file=sys.stderr,
        )
        return 1
    table = render_table(report)
    text = page.read_text(encoding="utf-8") if page.is_file() else ""
    if args.check:
        if current_table(text) != table:
            print(
                f"{page.name}'s catch table is not the generated one; run `python scripts/catch_table.py`",
                file=sys.stderr,
            )
            return 1
        return 0
    report.save(args.results)  # the recorded decisions are today's engine's
    write_text_atomic(page, splice(text, table))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
