"""``perfsuite tune TARGET``: search the loader knobs (and, with --batch, the batch size); lock the result in.

A thin shell over :mod:`perfsuite.tools.tune`. TARGET is a reference workload, a registered or
imported job (``--import``), or a perf test id (``tests/perf/test_x.py::test_y``). The knob flags of
``perfsuite run`` give a workload's starting point. Exit status: 0 tuned and written; 2 bad input, a
job that fails at every setting, or a ``--require`` bound no setting meets; 130 interrupted (the best
setting found so far is written).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from perfsuite.cli.common import add_run_arguments, import_modules, knobs_from_args
from perfsuite.errors import PerfsuiteError
from perfsuite.tools.tune.search import LOADER_KNOBS  # cheap: no torch, numpy or scipy at import

HELP = "find the loader settings (and with --batch the batch size) for a job on this machine; write them as thresholds"
DESCRIPTION = (
    "perfsuite tune TARGET: hill-climbs num_workers (1, 2, 4, ... up to the usable cores), then prefetch_factor, "
    "pin_memory (CUDA) and persistent_workers, each step an interleaved A/B of fresh runs judged by perfsuite ab's "
    "rule; keeps the smallest setting within --delta of the best; writes a tune file keyed by this machine's "
    "fingerprint and min_samples_per_s / max_data_wait_frac thresholds in pyproject.toml. When no step was "
    "decided (a busy machine drops every pair) it writes nothing and exits 3"
)
NOT_MEASURED = 3  # the exit status when no step was decided and nothing was written


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)  # TARGET (as `workload`), --import, --scale, --device, the knob flags, --json
    for action in p._actions:
        if action.dest == "workload":
            action.metavar = "TARGET"
            action.help = "a workload or job name (perfsuite list), or a perf test id (tests/perf/test_x.py::test_y)"
    t = p.add_argument_group("tune")
    t.add_argument("--batch", action="store_true", help="also search batch_size (it changes the training recipe)")
    t.add_argument("--max-batch", type=int, default=None, metavar="N", help="never try a batch above N")
    t.add_argument(
        "--batch-margin", type=float, default=0.10, metavar="F", help="keep the batch F below the largest that fit"
    )
    t.add_argument(
        "--max-workers",
        type=int,
        default=None,
        metavar="N",
        help="the top of the worker ladder (default: usable cores)",
    )
    t.add_argument(
        "--knobs",
        default=",".join(LOADER_KNOBS),
        metavar="LIST",
        help=f"the loader knobs to search, comma-separated (default {','.join(LOADER_KNOBS)})",
    )
    t.add_argument(
        "--delta",
        type=float,
        default=0.05,
        metavar="F",
        help="a step must raise samples/s by more than F (default 0.05) to be taken: the knee's tolerance",
    )
    t.add_argument("--alpha", type=float, default=0.01, help="one-sided significance of a gain (default 0.01)")
    t.add_argument("--min-rounds", type=int, default=3, help="rounds of 4 runs before a step may be decided")
    t.add_argument("--max-rounds", type=int, default=5, help="rounds of 4 runs per step at most (default 5)")
    t.add_argument(
        "--budget",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="time budget: no round starts that would end past it (default 1800)",
    )
    t.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="BOUND=VALUE",
        help="a bound the tuned setting must meet, e.g. min_samples_per_s=500 (exit 2 if none does); repeatable",
    )
    t.add_argument("--out", type=Path, default=Path("perfsuite-tuned"), metavar="DIR", help="where tune files go")
    t.add_argument(
        "--pyproject",
        type=Path,
        default=Path("pyproject.toml"),
        metavar="FILE",
        help="the pyproject.toml whose [tool.perfsuite.thresholds] get the tuned bounds (default: ./pyproject.toml)",
    )
    t.add_argument("--no-thresholds", action="store_true", help="write the tune file only, leave pyproject.toml")
    t.add_argument("--test", default=None, metavar="NAME", help="the test the thresholds are for (default: the id)")
    t.add_argument("--force", action="store_true", help="replace an earlier tune file and earlier bounds")


def _is_test_id(target: str) -> bool:
    return "::" in target or target.endswith(".py") or Path(target.split("::")[0]).is_file()


def _required(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise PerfsuiteError(f"--require {item!r}: write BOUND=VALUE, e.g. --require min_samples_per_s=500")
    return out


def _target(args: argparse.Namespace) -> Any:  # an InProcessTarget or a PytestTarget
    from perfsuite.core.options import resolve_device, run_lengths
    from perfsuite.jobs.registry import is_job_target
    from perfsuite.tools.tune import InProcessTarget, PytestTarget

    scale = args.scale or "smoke"
    target: Any
    if _is_test_id(args.workload):
        target = PytestTarget(args.workload, scale, resolve_device(args.device))
    else:
        import_modules(args.imports)
        steps, warmup, _ = run_lengths(scale, args.steps, args.warmup)
        job = is_job_target(args.workload)
        knobs = knobs_from_args(args)
        target = InProcessTarget(
            args.workload,
            "job" if job else "workload",
            scale,
            knobs,
            steps,
            warmup,
            seed=args.seed,
            cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        )
    if args.test:
        target.test_key = args.test
    return target


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from perfsuite.core.cores import usable_cores
    from perfsuite.judge.adaptive import ABRule
    from perfsuite.tools.tune import SearchConfig, format_report, lock_in, tune
    from perfsuite.tools.tune.progress import for_stream
    from perfsuite.tools.tune.session import suggested_test

    out, err = out or sys.stdout, err or sys.stderr
    if not (0 < args.delta < 1) or args.max_rounds < 1 or args.min_rounds < 1 or not args.budget > 0:
        raise PerfsuiteError("--delta must lie in (0, 1), --min-rounds and --max-rounds >= 1, --budget > 0")
    if not (0 <= args.batch_margin < 1) or not math.isfinite(args.batch_margin):
        raise PerfsuiteError(f"--batch-margin {args.batch_margin}: write a fraction in [0, 1), e.g. 0.1")
    if args.max_workers is not None and args.max_workers < 1:
        raise PerfsuiteError(f"--max-workers {args.max_workers}: write 1 or more")
    cores = usable_cores()
    target = _target(args)
    config = SearchConfig(
        rule=ABRule(factor=1 + args.delta, margin=1 + args.delta, alpha=args.alpha),
        min_rounds=args.min_rounds,
        max_rounds=max(args.max_rounds, args.min_rounds),
        budget_s=args.budget,
        max_workers=args.max_workers or cores.usable,
        cuda=target.device.startswith("cuda"),
        batch=args.batch,
        max_batch=args.max_batch,
        batch_margin=args.batch_margin,
        seed=args.seed,
        knobs=tuple(k.strip() for k in args.knobs.split(",") if k.strip()),
    )
    with _terminate_as_interrupt():  # a CI job's timeout (SIGTERM) stops the search as Ctrl-C does: the best is kept
        report = tune(
            target, config, progress=for_stream(err), required=_required(args.require), cores=cores.describe()
        )
    written = lock_in(report, args.out, None if args.no_thresholds else args.pyproject, force=args.force)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2), file=out)
    else:
        from perfsuite.report import terminal

        if terminal.is_terminal(out):  # headings in bold, outcomes coloured
            terminal.console_for(out).print(terminal.styled_lines(format_report(report).splitlines()))
        else:
            print(format_report(report), file=out)
        if written.tune_file:
            print(f"wrote {written.tune_file}", file=out)
        if written.thresholds:
            print(f"wrote the thresholds and tuned knobs to {written.thresholds}", file=out)
            if target.kind != "test":
                print(f"the perf test they bound (add it to your suite):\n{suggested_test(report)}", file=out)
        for skipped in written.skipped:
            print(skipped, file=out)
    if report.unmet:
        print("perfsuite tune: error: no setting met " + "; ".join(report.unmet), file=err)
        return 2
    if report.not_written:
        print(f"perfsuite tune: error: not tuned: {report.not_written}", file=err)
        return NOT_MEASURED
    return 130 if report.interrupted else 0


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the search runs (main thread only; elsewhere nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
