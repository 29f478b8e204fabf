"""``perfsuite ab [options] BASE HEAD [pytest args]``: two revisions interleaved on this machine."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TextIO

from perfsuite.ab.engine import (
    DEFAULT_BUDGET_S,
    DEFAULT_MAX_ROUNDS,
    DEFAULT_STATISTIC,
    RUN_STATISTICS,
    ABError,
    ABRule,
    Progress,
    format_markdown,
    run_ab,
    to_dict,
)
from perfsuite.ab.envs import ENV_MODES
from perfsuite.core.tmpfiles import write_text_atomic
from perfsuite.errors import PerfsuiteError

HELP = "interleaved A/B of two git revisions on this machine: regressed / same / unknown per perf test"
DESCRIPTION = (
    "perfsuite ab [options] BASE HEAD [pytest args]: builds both revisions in git worktrees and runs the "
    "selected perf tests alternately (ABBA, randomised) in fresh processes until each test is decided or the "
    "budget runs out"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", help="the base revision (a commit, branch or tag; for a PR: its merge base)")
    p.add_argument("head", help="the revision to judge")
    p.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        help="arguments for pytest in each worktree: the perf tests and their options, e.g. "
        "tests/perf -k face_parsing --perfsuite-steps 30. perfsuite ab's own options may come before BASE or "
        "after HEAD; after a `--`, everything goes to pytest",
    )
    add_options(p)


def add_options(p: argparse.ArgumentParser) -> None:
    """perfsuite ab's own options (also recognised after BASE HEAD, see :func:`split_own_options`)."""
    p.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: the current directory)")
    p.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"time budget: no round starts that would end past it (default {DEFAULT_BUDGET_S:.0f})",
    )
    p.add_argument("--max-rounds", type=int, default=DEFAULT_MAX_ROUNDS, help="at most this many rounds of 4 runs")
    p.add_argument("--min-rounds", type=int, default=3, help="at least this many rounds (default 3)")
    p.add_argument("--factor", type=float, default=ABRule.factor, help="a regression must exceed this ratio")
    p.add_argument("--margin", type=float, default=ABRule.margin, help="same: the interval lies within ±margin")
    p.add_argument("--alpha", type=float, default=ABRule.alpha, help="one-sided significance per look")
    p.add_argument("--seed", type=int, default=0, help="seeds the ABBA/BAAB order")
    p.add_argument(
        "--statistic",
        choices=list(RUN_STATISTICS),
        default=DEFAULT_STATISTIC,
        help=f"each run's step time the pairs compare (default {DEFAULT_STATISTIC}: its least disturbed step; "
        "docs/ab.md, the power table)",
    )
    p.add_argument(
        "--env",
        choices=ENV_MODES,
        default="auto",
        help="auto (default): the current environment when both sides declare the same dependencies, else a "
        "venv over it per changed side with only the changed requirements installed; current: both sides here "
        "whatever they declare; venv: always a venv per side",
    )
    p.add_argument("--same-env", action="store_true", help="the same as --env current")
    p.add_argument("--report-md", type=Path, metavar="FILE", help="write the markdown report (for a PR comment)")
    p.add_argument("--report-json", type=Path, metavar="FILE", help="write the JSON report")
    p.add_argument("--overwrite", action="store_true", help="replace --report-md/--report-json files that exist")
    p.add_argument("--parents", action="store_true", help="create the missing parent directories of the reports")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table (terminal) or markdown (piped)")


def split_own_options(args: argparse.Namespace) -> list[str]:
    """Take perfsuite ab's own options out of what follows BASE HEAD (into ``args``); the rest is pytest's.

    Everything after a ``--`` is pytest's, so a pytest option that happens to share a name stays pytest's.
    Raises ABError for an own option with a bad value, naming it.
    """
    rest = list(args.pytest_args)
    cut = rest.index("--") if "--" in rest else len(rest)
    mine, theirs = rest[:cut], rest[cut + 1 :]
    own = argparse.ArgumentParser(prog="perfsuite ab", add_help=False, allow_abbrev=False, exit_on_error=False)
    add_options(own)
    defaults = vars(own.parse_args([]))
    try:
        parsed, unknown = own.parse_known_args(mine)
    except argparse.ArgumentError as exc:
        raise ABError(f"{exc}; perfsuite ab's options are listed by `perfsuite ab --help`") from None
    for name, value in vars(parsed).items():
        if value != defaults[name]:
            setattr(args, name, value)
    return unknown + theirs


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        pytest_args = split_own_options(args)
    except PerfsuiteError as exc:
        print(f"perfsuite ab: error: {exc}", file=err)
        return 2
    try:
        if args.max_rounds < 1 or args.min_rounds < 0 or not (args.budget > 0 and math.isfinite(args.budget)):
            raise ABError("--max-rounds must be >= 1, --min-rounds >= 0 and --budget a positive number of seconds")
        rule = ABRule(factor=args.factor, margin=args.margin, alpha=args.alpha)
        session = run_ab(
            args.repo,
            args.base,
            args.head,
            pytest_args,
            rule=rule,
            budget_s=args.budget,
            max_rounds=args.max_rounds,
            min_rounds=args.min_rounds,
            seed=args.seed,
            env_mode="current" if args.same_env else args.env,
            statistic=args.statistic,
            progress=Progress(err),
        )
    except PerfsuiteError as exc:
        print(f"perfsuite ab: error: {exc}", file=err)
        return 2
    from perfsuite.report import terminal

    markdown, data = format_markdown(session), to_dict(session)
    if args.json:
        print(json.dumps(data, indent=2, allow_nan=False), file=out)
    elif terminal.is_terminal(out):  # a table for a person; the markdown is for a PR comment (--report-md, pipes)
        terminal.console_for(out).print(terminal.ab_report(data))
    else:
        print(markdown, file=out)
    if args.report_md:
        write_text_atomic(args.report_md, markdown)
        print(f"perfsuite ab: wrote {args.report_md} (markdown for a PR comment)", file=err)
    if args.report_json:
        write_text_atomic(args.report_json, json.dumps(data, indent=2, allow_nan=False) + "\n")
        print(f"perfsuite ab: wrote {args.report_json} (JSON report)", file=err)
    return 1 if session.regressed else 0
