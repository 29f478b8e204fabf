"""``perfsuite history add|import|show|summary``: Results kept per commit, and what moved when.

A thin shell over :mod:`perfsuite.tools.history`. ``add`` records Result files of the current commit (or
``--commit``); ``import`` records Result files of several commits, each named ``SHA=FILE`` or taken from a
folder per commit; ``show`` writes the static dashboard (``--png DIR`` a PNG per metric); ``summary`` prints
the markdown for a pull request comment: the newest commit against the ``--last`` N before it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfsuite.errors import PerfsuiteError

HELP = "keep Results per commit (add, import) and show how each figure moved (show, summary)"
DESCRIPTION = (
    "Record Results into a history folder keyed by commit, machine and test, and read it back: "
    "perfsuite history add result.json; perfsuite history show --out history.html; "
    "perfsuite history summary --last 20 (markdown for a pull request)"
)
ACTIONS = ("add", "import", "show", "summary")


# FILEs also after an option (history add --history D FILE): argparse gives a positional only what comes before
# the first option, so perfsuite.cli.main adds the words left over to it.
LATE_POSITIONALS = "files"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS, help="add: this commit's Results; import: SHA=FILE pairs; show; summary")
    p.add_argument(
        "files", nargs="*", metavar="FILE", help="Result files or folders (add), SHA=FILE or SHA=DIR (import)"
    )
    p.add_argument("--history", type=Path, default=Path("perf-history"), metavar="DIR", help="the history folder")
    p.add_argument(
        "--repo", type=Path, default=Path("."), metavar="DIR", help="the git clone the commits are in (it orders them)"
    )
    p.add_argument(
        "--commit",
        metavar="REV",
        default="HEAD",
        help="add: the commit the Results are of; show, summary: the newest commit, whose first-parent line "
        "orders the history (default HEAD)",
    )
    p.add_argument("--test", metavar="NAME", help="add: the test name to file them under (default: each Result's)")
    p.add_argument("--out", type=Path, metavar="FILE", help="show: the dashboard's HTML file")
    p.add_argument("--png", type=Path, metavar="DIR", help="show: also a PNG per metric into DIR")
    p.add_argument("--commit-url", metavar="URL", help="link commits: e.g. https://github.com/o/r/commit/{sha}")
    p.add_argument("--last", type=int, default=20, metavar="N", help="summary: the commits before the newest (20)")
    p.add_argument("--overwrite", action="store_true", help="show: replace an existing --out file")


def run(args: argparse.Namespace) -> int:
    from perfsuite.tools.history import dashboard
    from perfsuite.tools.history.store import HistoryStore, commit_info, load_result_files

    store = HistoryStore(args.history)
    if args.action in ("add", "import"):
        if not args.files:
            raise PerfsuiteError(
                f"history {args.action}: name the Result files, e.g. perfsuite history add result.json"
            )
        pairs: list[tuple[str, Path]] = []
        for given in args.files:
            if args.action == "import":
                rev, sep, file = given.partition("=")
                if not sep or not file:
                    raise PerfsuiteError(
                        f"history import {given!r}: write SHA=FILE (or SHA=DIR), e.g. 1a2b3c4=run.json"
                    )
                pairs.append((rev, Path(file)))
            else:
                pairs.append((args.commit, Path(given)))
        missing = [str(p) for _, p in pairs if not p.exists()]
        if missing:
            raise PerfsuiteError(f"history {args.action}: no such file or folder: {', '.join(missing)}")
        added = skipped = 0
        for rev, path in pairs:
            sha, when, subject = commit_info(args.repo, rev)
            for file, result in load_result_files([path]):
                if store.record(result, sha, when, subject, test=args.test) is None:
                    skipped += 1
                    print(f"{file}: {sha[:10]} already recorded for this machine and test; kept the first")
                else:
                    added += 1
        print(f"recorded {added} run(s) into {args.history}" + (f" ({skipped} already there)" if skipped else ""))
        return 0
    entries = list(store.entries())
    for problem in store.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not entries:
        raise PerfsuiteError(
            f"history {args.action}: {args.history} holds no runs; record some with `perfsuite history add`"
        )
    from perfsuite.tools.history.ancestry import first_parent_line, off_line, rank_of

    line = first_parent_line(args.repo, args.commit)  # the order: ancestry, never commit times
    for problem in off_line(entries, line):
        print(f"warning: {problem} ({args.commit} in {args.repo})", file=sys.stderr)
    rank = rank_of(line)
    on_line = [e for e in entries if e.commit in rank]
    if not on_line:
        raise PerfsuiteError(
            f"history {args.action}: none of the {len(entries)} runs in {args.history} is of a commit on the "
            f"first-parent line of {args.commit} in {args.repo}; pass --repo (the clone) and --commit (the newest)"
        )
    series = dashboard.build_series(on_line, line=line)
    if args.action == "summary":
        if args.last < 1:
            raise PerfsuiteError(f"--last {args.last}: write a number of commits >= 1")
        newest = max(on_line, key=lambda e: rank[e.commit])
        print(dashboard.summary_markdown(series, args.last, (newest.commit, newest.subject)), end="")
        return 0
    out = args.out or Path("perf-history.html")
    if out.exists() and not args.overwrite:
        raise PerfsuiteError(f"{out} exists; pass --overwrite to replace it, or --out another file")
    if not out.parent.is_dir():
        raise PerfsuiteError(f"{out}: its folder {out.parent} does not exist")
    dashboard.write_dashboard(out, series, store.problems, args.commit_url)
    print(f"wrote {out} ({len(series)} series, {len(entries)} runs)")
    if args.png is not None:
        for path in dashboard.write_pngs(series, args.png):
            print(f"wrote {path}")
    return 0
