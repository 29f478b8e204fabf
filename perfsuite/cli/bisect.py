"""``perfsuite bisect GOOD BAD --metric NAME (--test ID | -- python train.py ARGS)``: the commit that moved it.

A thin shell over :mod:`perfsuite.tools.history.bisect`: one run per commit for an exact counter, and over
:mod:`perfsuite.tools.history.timing_bisect` for a timing (each probe an interleaved A/B against GOOD, the
per-run value ``perfsuite ab``'s statistic); every run recorded in the history folder, resumable after Ctrl-C
from its state file.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.tools.history.store import HistoryStore

HELP = (
    "find the first commit between GOOD and BAD where a metric changed "
    "(an exact one: one run per commit; a timing: interleaved A/B probes)"
)
DESCRIPTION = (
    "Binary search over the first-parent commits after GOOD up to BAD, each measured in a git worktree of its own: "
    "perfsuite bisect v1.2 HEAD --metric syncs_per_step -- python train.py --epochs 1 "
    "(a timing, --metric step_ms, is decided by interleaved A/B probes against GOOD)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    # The options go into the remainder and are parsed by _split: argparse cannot take options between two
    # positionals and a `-- command` (the remainder would be consumed, empty, before them).
    p.add_argument("good", help="a commit where the metric had its old value")
    p.add_argument("bad", help="a later commit where it changed")
    p.add_argument("command", nargs=argparse.REMAINDER, help="OPTIONS (below), then -- python train.py ARGS")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = _options_parser().format_help()


def _options_parser() -> argparse.ArgumentParser:
    from perfsuite.cli.main import OneLineParser

    options = OneLineParser(prog="perfsuite bisect GOOD BAD", usage="%(prog)s OPTIONS [-- COMMAND]", add_help=False)
    _add_options(options)
    return options


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metric", help="required: an exact metric (syncs_per_step, ops_per_step...) or a timing (step_ms...)"
    )
    p.add_argument("--test", metavar="ID", help="a perf test's node id to run at each commit (instead of a command)")
    p.add_argument("--repo", type=Path, default=Path("."), metavar="DIR", help="the git clone to bisect")
    p.add_argument("--history", type=Path, default=Path("perf-history"), metavar="DIR", help="record every run here")
    p.add_argument("--state", type=Path, metavar="FILE", help="resume file (default: DIR/.bisect-<metric>.json)")
    p.add_argument("--steps", type=int, default=6, metavar="N", help="exec: measured steps per run (default 6)")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="one run's limit in seconds (900)")
    p.add_argument(
        "--delta", type=float, default=0.05, metavar="F", help="timing: a change is beyond this fraction (0.05)"
    )
    p.add_argument(
        "--max-rounds", type=int, default=20, metavar="N", help="timing: at most N rounds of 4 runs per probe (20)"
    )


def _split(args: argparse.Namespace) -> list[str]:
    """The command after ``--``; options written after GOOD BAD (argparse hands them over with the command)
    are parsed into ``args``."""
    rest = list(args.command)
    if "--" in rest:
        before, command = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
    elif rest and not rest[0].startswith("-"):  # GOOD BAD -- python ...: argparse took the `--`; all is the command
        before, command = [], rest
    else:
        before, command = rest, []
    _options_parser().parse_args(before, namespace=args)
    return command


def run(args: argparse.Namespace) -> int:
    from perfsuite.tools.history.bisect import Measurer, bisect, check_metric
    from perfsuite.tools.history.store import HistoryStore

    command = _split(args)
    if not args.metric:
        raise PerfsuiteError(
            "bisect: --metric is missing: name the metric that moved, an exact counter (syncs_per_step, "
            "ops_per_step...) or a timing (step_ms), "
            f"e.g. perfsuite bisect {args.good} {args.bad} --metric syncs_per_step "
            + (f"-- {' '.join(command)}" if command else f"--test {args.test}" if args.test else "-- python train.py")
        )
    if bool(command) == bool(args.test):
        raise PerfsuiteError("bisect: give a command after -- (python train.py ARGS) or --test ID, one of the two")
    mode = check_metric(args.metric)
    if args.steps < 1:
        raise PerfsuiteError(f"--steps {args.steps}: write a number of steps >= 1")
    if not (0.0 < args.delta < 1.0) or args.max_rounds < 3:
        raise PerfsuiteError(
            f"--delta {args.delta} --max-rounds {args.max_rounds}: write a fraction in (0, 1), e.g. 0.05, "
            "and at least 3 rounds (the ab rule needs 6 pairs)"
        )
    repo = args.repo.resolve()
    state = args.state or args.history / f".bisect-{args.metric}.json"
    measure = Measurer(
        repo,
        command,
        args.test,
        exec_args=("--steps", str(args.steps), "--warmup", "2"),
        timeout_s=args.timeout,
        run_test=lambda tree, out: _pytest_run(args.test, tree, out, args.timeout),
    )
    name = args.test or " ".join(command)
    if mode == "timing":
        return _run_timing(args, repo, measure, HistoryStore(args.history), state, name)
    found = bisect(repo, args.good, args.bad, args.metric, measure, HistoryStore(args.history), state, name, say=print)
    if found is None:
        print(f"{args.metric} is the same at {args.good} and {args.bad}: nothing to bisect")
        return 1
    print(f"first changed: {found.describe(args.metric)} ({found.runs} runs for {len(found.candidates)} commits)")
    return 0


STEP_TIMED = ("step_ms", "samples_per_s")  # bisected on perfsuite ab's per-run step time per sample


def _run_timing(
    args: argparse.Namespace, repo: Path, measure: Callable[[str], Result], store: HistoryStore, state: Path, name: str
) -> int:
    """Exit 0 with a culprit, 1 when BAD is the same as GOOD, 3 when a probe stayed inconclusive."""
    from perfsuite.judge.adaptive import ABRule
    from perfsuite.tools.history.timing_bisect import bisect_timing

    rule = ABRule(factor=1.0 + args.delta, margin=1.0 + args.delta)
    out = bisect_timing(
        repo,
        args.good,
        args.bad,
        args.metric,
        measure,
        _value_of(args.metric),
        rule,
        args.max_rounds,
        store,
        state,
        name,
        say=print,
        value_label="fastest step per sample, ms" if args.metric in STEP_TIMED else "",
    )
    runs = f"{out.runs} runs, {len(out.probes)} probes"
    if out.status == "found":
        print(f"first changed: {out.describe()} ({runs})")
        return 0
    print(f"{out.describe()} ({runs})")
    return 1 if out.status == "same" else 3


def _value_of(metric: str) -> Callable[[Result], float]:
    """The per-run value a probe compares: ``perfsuite ab``'s step time per sample for step_ms and
    samples_per_s (judged through it), the metric's own value for any other timing."""
    from perfsuite.ab.engine import per_run_values

    if metric in STEP_TIMED:
        return lambda result: per_run_values(result).value

    def own(result: Result) -> float:
        m = result.metric(metric)
        return float(m.value) if m.available and isinstance(m.value, (int, float)) else float("nan")

    return own


def _pytest_run(test: str, tree: Path, out: Path, timeout_s: float) -> Result:
    """The perf test at one commit, as a side of ``perfsuite ab`` runs it (the worktree first on PYTHONPATH)."""
    import sys

    from perfsuite.ab.engine import run_side

    side = run_side("bisect", tree, [test], out, sys.executable, timeout_s)
    if len(side.results) != 1:
        raise PerfsuiteError(
            f"pytest {test} gave {len(side.results)} Results (exit {side.returncode}): {side.log_tail[-400:]}"
        )
    return next(iter(side.results.values()))
