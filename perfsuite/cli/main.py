"""The ``perfsuite`` command: list workloads, run one with knobs, compare results.

A thin shell over the library: parse flags into Knobs and a RunSpec, call
the runner, print a table or the Result's JSON. Errors print one line that
says what to write instead, and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.core.knobs import Knobs


def _amp(value: str) -> Any:
    """``none`` means FP32; anything else is handed to the knob's validation (which refuses ``true``)."""
    if value.lower() in ("none", "fp32", "off"):
        return None
    if value.lower() in ("true", "false", "1", "0", "yes", "no", "on"):
        return value.lower() in ("true", "1", "yes", "on")  # a bool, so StepKnobs explains seed 003's bug
    return value


def _seed(text: str) -> int:
    """A dataset/model seed: an integer >= 0 (NumPy's SeedSequence refuses negatives with a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed: write an integer >= 0, e.g. --seed 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a seed: seeds are integers >= 0; write e.g. --seed 0")
    return value


def _add_import_argument(p: argparse.ArgumentParser) -> None:
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
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PerfsuiteError(
                f"--import {name}: {exc}; give a module importable from {os.getcwd()} "
                "(e.g. --import my_jobs for ./my_jobs.py)"
            ) from exc


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    from perfsuite.core.options import add_cli_arguments

    p.add_argument("workload", help="a workload or job name (see `perfsuite list`)")
    _add_import_argument(p)
    add_cli_arguments(p)  # --scale, --device, --steps, --warmup, --observe-steps: the plugin's table and defaults
    p.add_argument("--aug", default="gpu", help="where augmentation runs: cpu | gpu | none (gpu = on --device)")
    p.add_argument("--cutmix", type=float, default=0.0, help="per-batch probability of paired CutMix")
    p.add_argument("--mixup", type=float, default=0.0, help="MixUp probability (refused for masks)")
    p.add_argument("--seed", type=_seed, default=0, help="dataset and model seed, an integer >= 0")
    p.add_argument(
        "--cache-dir",
        default=None,
        help="where datasets are generated (default: $PERFSUITE_CACHE or ~/.cache/perfsuite)",
    )
    loader = p.add_argument_group("loader knobs")
    loader.add_argument("--workers", type=int, default=2, dest="num_workers")
    loader.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=False)
    loader.add_argument("--persistent-workers", action=argparse.BooleanOptionalAction, default=False)
    loader.add_argument("--prefetch", type=int, default=None, dest="prefetch_factor")
    loader.add_argument("--drop-last", action=argparse.BooleanOptionalAction, default=True)
    loader.add_argument("--non-blocking", action=argparse.BooleanOptionalAction, default=False)
    loader.add_argument("--batch-size", type=int, default=None, help="default: the scale's batch size")
    step = p.add_argument_group("step knobs")
    step.add_argument("--amp", type=_amp, default=None, help="none | bf16 | fp16")
    step.add_argument(
        "--compile",
        nargs="?",
        const="default",
        default=None,
        help="compile the model; optional mode (default, reduce-overhead, max-autotune, ...)",
    )
    step.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=False)
    step.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=False)
    step.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=False)
    step.add_argument("--fused", action=argparse.BooleanOptionalAction, default=False, help="fused AdamW")
    step.add_argument("--log-interval", type=int, default=0, help="read the loss back every N steps (0: never)")
    step.add_argument("--eval-interval", type=int, default=0, help="a short evaluation every N steps (0: never)")
    p.add_argument("--json", action="store_true", help="print the Result as JSON")


def knobs_from_args(args: argparse.Namespace) -> Knobs:
    from perfsuite.core.knobs import FLAT_KNOBS, Knobs
    from perfsuite.core.options import resolve_device

    flat = {name: getattr(args, name) for name in FLAT_KNOBS if hasattr(args, name)}
    args.device = resolve_device(args.device)
    return Knobs.from_flat(**flat, device=args.device)


def format_run(result: Any) -> str:
    """The short table `perfsuite run` prints: throughput, step time, and every other metric."""
    step = result.metric("step_ms")
    lines = [
        f"{result.workload} ({result.scale}) on {result.fingerprint.gpu_model or 'cpu'}: "
        f"batch {result.batch_size}, {result.steps} measured steps",
        f"  {'samples/s':<16}{result.value('samples_per_s'):>12.1f}",
        f"  {'step ms median':<16}{step.value:>12.2f}",
        f"  {'step ms p90':<16}{step.detail.get('p90', float('nan')):>12.2f}",
    ]
    for name, metric in result.metrics.items():
        if name in ("samples_per_s", "step_ms"):
            continue
        shown = f"{metric.value:.3f}" if isinstance(metric.value, float) else str(metric.value)
        text = shown if metric.available else f"unavailable ({metric.reason})"
        lines.append(f"  {name:<16}{text:>12}" if metric.available else f"  {name:<16}{text}")
    syncs = result.metric("syncs_per_step")
    lines += [
        f"    sync site: {site['op']} at {site['site']}, {site['per_step']:g}/step"
        for site in (syncs.detail.get("sites", []) if syncs.available else [])
    ]
    lines += [f"  note: {note}" for note in result.notes]
    knobs = ", ".join(f"{k}={v}" for k, v in result.knobs.items())
    lines.append(f"  knobs: {knobs}")
    by_source: dict[str, list[str]] = {}
    for name, source in result.knob_sources.items():
        by_source.setdefault(source, []).append(name)
    lines += [f"  {source}: {', '.join(names)}" for source, names in by_source.items()]
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    from perfsuite.jobs.registry import get_workload, job_names, job_summary, workload_names

    import_modules(args.imports)
    jobs = [{"name": name, "job": True, "summary": job_summary(name)} for name in job_names()]
    rows = [get_workload(name).describe() for name in workload_names()]
    if args.json:
        print(json.dumps(rows + jobs, indent=2))
        return 0
    for job in jobs:
        print(f"{job['name']:<18} job      {job['summary']}")
    for row in rows:
        print(f"{row['name']:<18} seed {row['seed']}  {row['summary']}")
        for scale, s in row["scales"].items():
            h, w = s["image_size"]
            print(f"    {scale:<6} {w}x{h}, {s['num_samples']} samples, batch {s['batch_size']}, model {s['model']}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from perfsuite.core.options import run_lengths
    from perfsuite.harness.runner import RunSpec, run
    from perfsuite.jobs.registry import is_job_target

    import_modules(args.imports)
    scale = args.scale or "smoke"
    steps, warmup, observe_steps = run_lengths(scale, args.steps, args.warmup, args.observe_steps)
    if is_job_target(args.workload):  # a user's job: only the knobs typed on the command line are asked of it
        from perfsuite.core.knobs import FLAT_KNOBS, Knobs

        defaults = argparse.ArgumentParser()
        _add_run_arguments(defaults)
        default = vars(defaults.parse_args([args.workload]))
        asked = {k: getattr(args, k) for k in FLAT_KNOBS if hasattr(args, k) and getattr(args, k) != default[k]}
        spec = RunSpec(
            args.workload,
            scale=scale,
            knobs=Knobs(device=knobs_from_args(args).device),
            steps=steps,
            warmup=warmup,
            observe_steps=observe_steps,
            seed=args.seed,
            job_knobs=asked,
        )
    else:
        spec = RunSpec(
            args.workload,
            scale=scale,
            knobs=knobs_from_args(args),
            steps=steps,
            warmup=warmup,
            observe_steps=observe_steps,
            seed=args.seed,
            cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        )
    result = run(spec)
    print(result.to_json() if args.json else format_run(result))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfsuite", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="the workloads and jobs (reference, entry points, --import) and scales")
    p_list.add_argument("--json", action="store_true")
    _add_import_argument(p_list)
    p_list.set_defaults(func=cmd_list)
    p_run = sub.add_parser("run", help="run one workload with knobs and probes; print its metrics")
    _add_run_arguments(p_run)
    p_run.set_defaults(func=cmd_run)
    from perfsuite.report.compare import add_compare_arguments, run_compare

    p_cmp = sub.add_parser("compare", help="compare results or baseline directories: markdown for PRs")
    add_compare_arguments(p_cmp)
    p_cmp.set_defaults(func=run_compare)
    from perfsuite.ab.engine import add_ab_arguments, cmd_ab

    p_ab = sub.add_parser(
        "ab",
        help="interleaved A/B of two git revisions on this machine: regressed / same / unknown per perf test",
        description="perfsuite ab [options] BASE HEAD [pytest args]: "
        "builds both revisions in git worktrees and runs the selected perf tests alternately "
        "(ABBA, randomised) in fresh processes until each test is decided or the budget runs out",
    )
    add_ab_arguments(p_ab)
    p_ab.set_defaults(func=cmd_ab)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PerfsuiteError as exc:
        print(f"perfsuite: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
