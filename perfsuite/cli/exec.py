"""``perfsuite exec [options] -- python train.py ARGS``: a user's training script, run unchanged, under the probes.

A thin shell over :mod:`perfsuite.harness.script.drive`: the command after ``--`` becomes a
:class:`perfsuite.Script`, the run lengths come from the same table as ``perfsuite run``'s,
and the Result is printed as a table (``--json``: as JSON) or written to ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

HELP = "run a training script unchanged (its DataLoader's batches mark the steps); print its metrics"
DESCRIPTION = (
    "Run `python train.py ARGS` (or `python -m module ARGS`) in this process, unchanged: the batches its "
    "training DataLoader yields mark the steps of the warm-up, the measured window and the observed steps, "
    "then the script is stopped. Example: perfsuite exec --steps 10 -- python train.py --data data --epochs 20"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from perfsuite.core.options import add_cli_arguments

    add_cli_arguments(p, names=("steps", "warmup", "observe_steps", "period_steps"))
    p.add_argument(
        "--loader",
        metavar="NAME",
        help="the training DataLoader when the script iterates several: the class of its dataset or loader "
        "(FaceParsingDataset), NAME#N for the N-th such, or N for the N-th DataLoader iterated (default: the first)",
    )
    p.add_argument(
        "--criterion",
        metavar="NAME",
        help="the loss module to check the labels at, by class (OhemCELoss) or path (LossP.criteria); default: the "
        "innermost loss module the labels reach",
    )
    p.add_argument("--num-classes", type=int, metavar="N", help="classes of the targets (for label checks)")
    p.add_argument("--ignore-index", type=int, metavar="N", help="the ignore label (default: the loss module's)")
    p.add_argument("--target-kind", choices=("mask", "label"), default="mask", help="per-pixel masks or one label")
    p.add_argument(
        "--flip-pairs",
        type=_flip_pairs,
        metavar="A:B,...",
        help="refused here (a script's batches do not show which samples its flip mirrored): check the flip's "
        "swap with perfsuite check --flip-pairs A:B,... -- python train.py",
    )
    p.add_argument(
        "--target-samples-per-s",
        type=float,
        metavar="R",
        help="the samples/s the loader must feed: loader_headroom is judged against it (a script's run has no "
        "speed of light to compare with)",
    )
    p.add_argument("--name", help="the name Results use (default: the command after --)")
    p.add_argument("--json", action="store_true", help="print the Result as JSON (the script's own output: stderr)")
    p.add_argument("--out", type=Path, metavar="FILE", help="write the Result as JSON to FILE (for perfsuite compare)")
    p.add_argument("--overwrite", action="store_true", help="let --out replace an existing file")
    from perfsuite.cli.script_ranks import add_rank_arguments

    add_rank_arguments(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python train.py ARGS (or -- python -m module ARGS)")


def _flip_pairs(text: str) -> list[tuple[int, int]]:
    try:
        pairs = [tuple(int(v) for v in item.split(":")) for item in text.split(",") if item]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 for p in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: write label pairs as A:B, comma-separated, e.g. 4:5,6:7")
    return [(p[0], p[1]) for p in pairs]


def refuse_flip_pairs(pairs: list[tuple[int, int]], num_classes: int | None, command: list[str]) -> str:
    """Why ``exec --flip-pairs`` is refused, and the command that checks the swap: the label probe sees the targets
    that reach the loss, which do not show whether their sample was mirrored (a Job's ``gpu_transform`` is run
    again on painted images; a script's Dataset transform is ``perfsuite check``'s to run)."""
    text = ",".join(f"{a}:{b}" for a, b in pairs)
    return (
        f"--flip-pairs {text}: perfsuite exec does not check left/right swaps (its batches do not show which samples "
        f"the flip mirrored); run perfsuite check --num-classes {num_classes or 'N'} --flip-pairs {text} -- "
        + " ".join(command)
    )


def run(args: argparse.Namespace) -> int:
    from perfsuite.core.options import period_steps, run_lengths
    from perfsuite.errors import ScriptError
    from perfsuite.harness.runner import RunSpec
    from perfsuite.harness.runner import run as run_job
    from perfsuite.jobs.script import Script

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise PerfsuiteError("no command to run: write perfsuite exec [options] -- python train.py ARGS")
    if args.flip_pairs is not None:
        raise PerfsuiteError(refuse_flip_pairs(args.flip_pairs, args.num_classes, command))
    if args.out is not None and args.out.exists() and not args.overwrite:
        raise PerfsuiteError(f"--out {args.out} exists; pass --overwrite to replace it, or name another file")
    script = Script(
        command,
        loader=args.loader,
        name=args.name or " ".join(command),  # the Result's test name: the command that was run (compare shows it)
        criterion=args.criterion,
        num_classes=args.num_classes,
        ignore_index=args.ignore_index,
        target_kind=args.target_kind,
    )
    steps, warmup, observe_steps = run_lengths("smoke", args.steps, args.warmup, args.observe_steps)
    spec = RunSpec(
        script,
        target_samples_per_s=args.target_samples_per_s,
        steps=steps,
        warmup=warmup,
        observe_steps=observe_steps,
        period_steps=period_steps(args.period_steps, args.observe_steps),
    )
    import contextlib

    # With --json, stdout is the Result's: the script's own prints go to stderr.
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    import dataclasses

    from perfsuite.cli.progress import phase_progress
    from perfsuite.cli.script_ranks import run_ranks, wants_ranks

    # --out is locked by perfsuite.cli.main for the whole command: a second exec --out of it refuses
    try:  # each phase's progress on a terminal, as perfsuite run's (nothing drawn inside the measured window)
        with quiet, phase_progress("perfsuite exec") as show:
            if wants_ranks(args):
                result = run_ranks(script, spec, args, "exec")
            else:
                result = run_job(dataclasses.replace(spec, progress=show))
    except ScriptError as exc:
        if exc.script_traceback:
            print(exc.script_traceback, end="", file=sys.stderr)
        raise
    if args.out is not None:
        _write(args.out, result, args.overwrite)
        print(f"perfsuite exec: wrote {args.out} (the Result, for perfsuite compare)", file=sys.stderr)
    if args.json and result.script is not None:  # the table says it; JSON on stdout, so say it here too
        print(f"perfsuite exec: {result.script.describe()}", file=sys.stderr)
    from perfsuite.cli.hints import for_command
    from perfsuite.cli.run import for_terminal

    print(result.to_json() if args.json else for_terminal(for_command(_table(result), args)))  # exec's flags
    return 0


def _write(path: Path, result: Any, overwrite: bool) -> None:
    import os

    from perfsuite.core.tmpfiles import write_text_atomic

    try:
        write_text_atomic(path, result.to_json() + "\n", os.replace if overwrite else os.link)
    except FileExistsError:
        raise PerfsuiteError(f"--out {path} appeared while the script ran; pass --overwrite to replace it") from None


def _table(result: Any) -> str:
    from perfsuite.cli.run import format_run

    return format_run(result)
