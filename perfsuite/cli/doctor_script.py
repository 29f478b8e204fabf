"""``perfsuite doctor [options] -- python train.py ARGS``: the doctor on a script (perfsuite.tools.doctor.script).

Also what doctor does with a perf test that runs a :class:`perfsuite.Script`: every run of the
script in a fresh process, never in doctor's own.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.errors import PerfsuiteError

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$")


def add_script_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "command",
        nargs="*",
        help="or, after --, a training script's command: -- python train.py ARGS (doctor runs it unchanged, each "
        "run in a fresh process)",
    )
    group = p.add_argument_group("a script's labels (as perfsuite exec)")
    group.add_argument("--loader", metavar="NAME", help="the training DataLoader when the script iterates several")
    group.add_argument("--criterion", metavar="NAME", help="the loss module to check the labels at (class or path)")
    group.add_argument("--num-classes", type=int, metavar="N", help="classes of the targets (for label checks)")
    from perfsuite.cli.run import _count

    group.add_argument(
        "--nproc-per-node",
        type=_count(1),
        default=1,
        metavar="N",
        help="a DDP script: each run launches it on N ranks through torch.distributed.run (as perfsuite exec)",
    )


def is_script_command(args: argparse.Namespace) -> bool:
    """``-- python train.py ARGS`` (the first word lands in ``workload``, the rest in ``command``)."""
    import os

    return bool(args.command) or bool(_PYTHON.match(os.path.basename(args.workload)))


def is_script_spec(spec: Any) -> bool:
    from perfsuite.jobs.script import Script

    return isinstance(spec.workload, Script)


def diagnose_command(
    args: argparse.Namespace, counterfactuals: bool, progress: Callable[[str], None], lengths: tuple[int, int, int]
) -> Any:
    """The doctor's diagnosis of ``-- python train.py ARGS``; ``lengths``: doctor's default steps, warm-up, observed."""
    from perfsuite.core.options import period_steps
    from perfsuite.harness.runner import RunSpec
    from perfsuite.jobs.script import Script

    script = Script(
        [args.workload, *args.command], loader=args.loader, criterion=args.criterion, num_classes=args.num_classes
    )
    spec = RunSpec(
        script,
        steps=args.steps or lengths[0],
        warmup=args.warmup if args.warmup is not None else lengths[1],
        observe_steps=args.observe_steps if args.observe_steps is not None else lengths[2],
        target_samples_per_s=args.target_samples_per_s,
        period_steps=period_steps(args.period_steps, args.observe_steps),
    )
    return diagnose_spec(spec, script.command(), args, counterfactuals, progress)


def rounds_within(args: argparse.Namespace, minutes: float | None) -> tuple[Any, int]:
    """The diagnosis's budget, and the most rounds it may run: ``--max-rounds``; else, within a budget, up to
    MAX_ROUNDS while the fixes' intervals leave the answer open; without a budget, just ``--rounds``."""
    from perfsuite.tools.doctor.budget import Budget
    from perfsuite.tools.doctor.decide import MAX_ROUNDS

    budget = Budget.minutes(minutes)
    if args.max_rounds is not None:
        return budget, args.max_rounds
    return budget, max(args.rounds, MAX_ROUNDS) if budget.seconds is not None else args.rounds


def diagnose_spec(
    spec: Any, target: str, args: argparse.Namespace, counterfactuals: bool, progress: Callable[[str], None]
) -> Any:
    from perfsuite.tools.doctor.script import DEFAULT_BUDGET_MINUTES, diagnose_script

    try:
        nproc = args.nproc_per_node
        budget, most = rounds_within(args, args.budget if args.budget is not None else DEFAULT_BUDGET_MINUTES)
        return diagnose_script(spec.workload, spec, target, args.rounds, counterfactuals, progress, nproc, budget, most)
    except PerfsuiteError as exc:
        tb = getattr(exc, "script_traceback", "")
        if tb:
            print(tb, end="", file=sys.stderr)
        raise


def no_diagnosis(target: str, failed: Sequence[BaseException]) -> BaseException:
    """A perf test whose diagnosis failed, or gave none: doctor exits non-zero, naming the run."""
    if failed:
        first = failed[0]
        if isinstance(first, (KeyboardInterrupt, PerfsuiteError)):
            return first
        return PerfsuiteError(f"diagnosing {target} failed: {type(first).__name__}: {first}")
    return PerfsuiteError(f"{target}: its perf_run calls gave no diagnosis")
