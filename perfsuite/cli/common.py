"""What several commands share: the knob flags of a run, ``--import``, and turning flags into Knobs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.core.knobs import Knobs


def amp_value(value: str) -> Any:
    """``none`` means FP32; anything else is handed to the knob's validation (which refuses ``true``)."""
    if value.lower() in ("none", "fp32", "off"):
        return None
    if value.lower() in ("true", "false", "1", "0", "yes", "no", "on"):
        return value.lower() in ("true", "1", "yes", "on")  # a bool, so StepKnobs explains seed 003's bug
    return value


def seed_value(text: str) -> int:
    """A dataset/model seed: an integer >= 0 (NumPy's SeedSequence refuses negatives with a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed: write an integer >= 0, e.g. --seed 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a seed: seeds are integers >= 0; write e.g. --seed 0")
    return value


def add_import_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import",
        action="append",
        default=[],
        dest="imports",
        metavar="MODULE",
        help="import MODULE first (from the working directory), so the workloads and jobs it registers "
        "can be named; repeatable",
    )


def import_modules(names: Sequence[str]) -> None:
    """Import the modules given with --import, the working directory first on sys.path."""
    import importlib
    import os

    if names and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    from perfsuite.core.source_paths import job_imported_from

    for name in names:
        try:
            job_imported_from(getattr(importlib.import_module(name), "__file__", None))
        except SyntaxError as exc:  # one line where it is, as Python's own first line of it; no traceback
            where = f"{exc.filename}:{exc.lineno}" if exc.filename else name
            raise PerfsuiteError(
                f"--import {name}: {where}: {type(exc).__name__}: {exc.msg}; fix that line of the module"
            ) from None
        except ImportError as exc:
            raise PerfsuiteError(
                f"--import {name}: {exc}; give a module importable from {os.getcwd()} "
                "(e.g. --import my_jobs for ./my_jobs.py)"
            ) from exc


def add_run_arguments(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    from perfsuite.core.options import add_cli_arguments

    p.add_argument("workload", help="a workload or job name (see `perfsuite list`)")
    add_import_argument(p)
    add_cli_arguments(p)  # --scale, --device, --steps, --warmup, --observe-steps: the plugin's table and defaults
    p.add_argument("--aug", default="gpu", help="where augmentation runs: cpu | gpu | none (gpu = on --device)")
    p.add_argument("--cutmix", type=float, default=0.0, help="per-batch probability of paired CutMix")
    p.add_argument("--mixup", type=float, default=0.0, help="MixUp probability (refused for masks)")
    p.add_argument("--seed", type=seed_value, default=0, help="dataset and model seed, an integer >= 0")
    p.add_argument(
        "--cache-dir",
        default=None,
        help="where datasets are generated (default: $PERFSUITE_CACHE or ~/.cache/perfsuite)",
    )
    loader = p.add_argument_group("loader knobs")
    loader.add_argument(
        "--workers", type=int, default=2, dest="num_workers", help="DataLoader worker processes (0: load in this one)"
    )
    loader.add_argument(
        "--pin-memory",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pin batches in page-locked memory for faster copies (CUDA only; off on a CPU run, with a note)",
    )
    loader.add_argument(
        "--persistent-workers",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep the workers between epochs instead of forking them again",
    )
    loader.add_argument(
        "--prefetch",
        type=int,
        default=None,
        dest="prefetch_factor",
        help="batches each worker loads ahead (default: torch's, 2)",
    )
    loader.add_argument(
        "--drop-last",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="drop a short last batch, so every step has the same shape",
    )
    loader.add_argument(
        "--non-blocking",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="copy batches to the device with non_blocking=True (CUDA only; off on a CPU run, with a note)",
    )
    loader.add_argument("--batch-size", type=int, default=None, help="default: the scale's batch size")
    step = p.add_argument_group("step knobs")
    step.add_argument("--amp", type=amp_value, default=None, help="none | bf16 | fp16")
    step.add_argument(
        "--compile",
        nargs="?",
        const="default",
        default=None,
        help="compile the model; optional mode (default, reduce-overhead, max-autotune, ...)",
    )
    step.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="the model and its input in channels_last memory format",
    )
    step.add_argument(
        "--tf32", action=argparse.BooleanOptionalAction, default=False, help="TF32 matmuls and convolutions (CUDA)"
    )
    step.add_argument(
        "--cudnn-benchmark",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="let cuDNN pick the fastest convolution algorithms (CUDA)",
    )
    step.add_argument("--fused", action=argparse.BooleanOptionalAction, default=False, help="fused AdamW")
    step.add_argument("--log-interval", type=int, default=0, help="read the loss back every N steps (0: never)")
    step.add_argument("--eval-interval", type=int, default=0, help="a short evaluation every N steps (0: never)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print the Result as JSON")


def knobs_from_args(args: argparse.Namespace) -> Knobs:
    from perfsuite.core.knobs import FLAT_KNOBS, Knobs
    from perfsuite.core.options import resolve_device

    flat = {name: getattr(args, name) for name in FLAT_KNOBS if hasattr(args, name)}
    args.device = resolve_device(args.device)
    return Knobs.from_flat(**flat, device=args.device)


def add_prediction_arguments(p: Any) -> None:
    """--predict-for and --demand-dir: one definition for every command that predicts a GPU runner's starvation."""
    p.add_argument(
        "--predict-for",
        metavar="RUNNER",
        help="predict input efficiency on that GPU runner (e.g. nvidia-h200): this run's loader supply, scaled to "
        "the runner's host, against the runner's recorded demand (baselines/demand/RUNNER.json)",
    )
    p.add_argument(
        "--demand-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the runners' demand files are (default: baselines/demand under the project's root)",
    )


def demand_for(args: argparse.Namespace) -> Any:
    """The runner's demand file named by --predict-for (DemandError, exit 2, if there is none); None without it."""
    if not getattr(args, "predict_for", None):
        return None
    from perfsuite.judge.starvation import load_demand

    return load_demand(args.predict_for, args.demand_dir)
