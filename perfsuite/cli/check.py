"""``perfsuite check [options] -- python train.py ARGS``: the augmentation properties on a script's own transform.

A thin shell over :func:`perfsuite.harness.script.transform_check.check_script`: the
script runs until it iterates its training DataLoader (found as ``perfsuite
exec`` finds it), and its Dataset's transform is checked on the Dataset's own
samples. Labels come from the flags, else ``[tool.perfsuite.labels]`` in the
nearest pyproject.toml above the script, else (ignore index only) the loss
module's. The transform is found by what it does (the outermost call in
``__getitem__`` that takes the image and the mask together and returns them
together), or named with ``--transform``. Exit 0: every property held; 1: one
broke (its cause, the line of the transform that did it, and evidence printed);
2: bad input, or a transform perfsuite cannot find or adapt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfsuite.cli.exec import _flip_pairs
from perfsuite.errors import PerfsuiteError

HELP = "check the training script's own augmentation (alignment, labels, flip pairs) on its own samples"
DESCRIPTION = (
    "Run `python train.py ARGS` until it iterates its training DataLoader, then run the paired-augmentation "
    "properties (labels, declared left/right swaps, image/mask alignment) on the transform its Dataset runs (the "
    "outermost call in dataset[i] that takes the image and mask together and returns both, whatever its name), "
    "fed the Dataset's own samples. Exit 1 names the broken property, its cause and the line that did it. Example: "
    "perfsuite check --num-classes 11 --flip-pairs 3:4 -- python train.py --data data"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--loader",
        metavar="NAME",
        help="the training DataLoader when the script iterates several (as perfsuite exec's --loader)",
    )
    p.add_argument("--criterion", metavar="CLASS", help="the loss module's class, when the script holds several")
    p.add_argument("--num-classes", type=int, metavar="N", help="classes of the masks (or [tool.perfsuite.labels])")
    p.add_argument("--ignore-index", type=int, metavar="N", help="the ignore label (default: the loss module's)")
    p.add_argument("--flip-pairs", type=_flip_pairs, metavar="A:B,...", help="labels a horizontal flip swaps: 4:5,6:7")
    p.add_argument(
        "--transform",
        metavar="NAME",
        help="the paired transform to check, when the outermost call in dataset[i] that takes and returns the image "
        "and mask is not it: an attribute or method name (trans_train) or module:function (face_dataset:augment)",
    )
    p.add_argument("--samples", type=_positive, default=8, metavar="N", help="Dataset samples to check (default 8)")
    p.add_argument("--seeds", type=_positive, default=4, metavar="N", help="calls per sample, seeds 0..N-1 (default 4)")
    p.add_argument(
        "--subpixel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the strict and sub-pixel alignment pass (default: when the transform keeps colours up to a "
        "per-channel affine map, such as Normalize)",
    )
    p.add_argument(
        "--deadline",
        type=_seconds,
        default=None,
        metavar="S",
        help="the most seconds one dataset[i] may take before the check stops (default 120, perfsuite exec's floor)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python train.py ARGS (or -- python -m module ARGS)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds; write e.g. 300") from None
    if not 0 < value < 10**7:
        raise argparse.ArgumentTypeError(f"{text} seconds: write a number above 0 and below 10000000, e.g. 300")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write a whole number >= 1")
    return value


def labels_table(start: Path) -> tuple[dict[str, Any], Path | None]:
    """``[tool.perfsuite.labels]`` of the nearest pyproject.toml at or above ``start`` (validated), and its path."""
    from perfsuite.plugin.settings import read_pyproject

    for folder in [start, *start.parents]:
        if (folder / "pyproject.toml").is_file():
            table = read_pyproject(folder).get("labels", {})
            path = folder / "pyproject.toml"
            known = {"num_classes", "ignore_index", "flip_pairs"}
            for key in table:
                if key not in known:
                    raise PerfsuiteError(
                        f"{path}: [tool.perfsuite.labels] has unknown key {key!r}; "
                        f"known keys: {', '.join(sorted(known))}"
                    )
            return table, path
    return {}, None


def run(args: argparse.Namespace) -> int:
    from perfsuite.errors import PropertyViolation, ScriptError
    from perfsuite.harness.script.transform_check import check_script
    from perfsuite.jobs.script import Script

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise PerfsuiteError("no command to run: write perfsuite check [options] -- python train.py ARGS")
    probe = Script(command)
    table, where = labels_table((probe.path.parent if probe.path is not None else Path.cwd()).resolve())
    pairs = args.flip_pairs if args.flip_pairs is not None else table.get("flip_pairs")
    script = Script(
        command,
        loader=args.loader,
        criterion=args.criterion,
        num_classes=args.num_classes if args.num_classes is not None else table.get("num_classes"),
        ignore_index=args.ignore_index if args.ignore_index is not None else table.get("ignore_index"),
        flip_pairs=[tuple(p) for p in pairs] if pairs is not None else None,
    )
    if where is not None and table:
        print(f"labels from {where} [tool.perfsuite.labels] where no flag gave them", file=sys.stderr)
    from perfsuite.cli.progress import waiting

    try:  # a live line on a terminal says what the check is doing (nothing when piped)
        with waiting("perfsuite check") as note:
            note("running the script until it iterates its training DataLoader")
            report = check_script(
                script,
                samples=args.samples,
                seeds=args.seeds,
                subpixel=args.subpixel,
                transform=args.transform,
                log=note,
                **({"deadline_s": args.deadline} if args.deadline is not None else {}),
            )
    except ScriptError:
        raise
    except PropertyViolation as exc:
        print(f"FAILED {script.command()}")
        fix = exc.where or ""
        joint = ", " if fix.startswith("in ") else ": "
        print(f"cause: {exc.cause or 'unclassified'}" + (joint + fix if fix else ""))
        print(str(exc))
        return 1
    print(f"passed {script.command()}")
    print("\n".join(report.lines()))
    return 0
