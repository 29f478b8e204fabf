"""``perfsuite run NAME [knobs]``: one run of a workload or job with every probe; its metrics or its Result.

A thin shell over the library: parse flags into Knobs and a RunSpec, call the runner, print a
table or the Result's JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfsuite.cli.common import (
    add_prediction_arguments,
    add_run_arguments,
    demand_for,
    import_modules,
    knobs_from_args,
)
from perfsuite.errors import PerfsuiteError

HELP = "run one workload or job with knobs and probes; print its metrics"
DESCRIPTION = (
    "Run one workload or job: warm-up, the measured window, the speed-of-light steps (the step fed one batch "
    "kept on the device: how fast it runs when loading costs nothing) and the observed steps, "
    "with every probe; print its metrics (or the Result as JSON with --json, to save for `perfsuite compare`). "
    "On a terminal each phase shows progress (nothing is drawn inside the measured window); under CI or piped, "
    "nothing is. Ctrl-C stops it with one line and exit status 130; no partial Result is written."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument(
        "--repeat",
        type=_count(1),
        default=1,
        metavar="K",
        help="run K times, one after another; with --out, keep the K runs as one baseline file (a wall-clock "
        "verdict needs several base runs: docs/baselines.md); 3 is what --perfsuite-save keeps",
    )
    p.add_argument(
        "--setup-only",
        action="store_true",
        help="stop after the set-up (the dataset, generated or found in the cache, and the model build) and print "
        "its phases' times; no step runs, so no Result is made",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write the Result (with --repeat K, a baseline file of the K runs) as JSON to FILE, for perfsuite compare",
    )
    gpu = p.add_argument_group("starvation on a GPU runner, predicted from this run (docs/gpu.md)")
    gpu.add_argument(
        "--loader-only",
        action="store_true",
        help="measure the loader alone: the window's steps take their batches and run nothing (no copy, no model), "
        "so its workers' CPU per sample is what they supply, without waiting on a slow CPU step",
    )
    add_prediction_arguments(gpu)
    ranks = p.add_argument_group("ranks (DDP under torchrun; docs/distributed.md)")
    ranks.add_argument(
        "--nproc-per-node",
        type=_count(1),
        default=1,
        metavar="N",
        help="run on N ranks through torch.distributed.run (gloo on CPU, NCCL on CUDA, one GPU per rank)",
    )
    ranks.add_argument(
        "--scaling-rounds",
        type=_count(0),
        default=0,
        metavar="R",
        help="also measure scaling_efficiency from R interleaved one-rank and N-rank launches (3 or more)",
    )
    ranks.add_argument(
        "--omp-threads",
        type=_count(1),
        default=None,
        metavar="T",
        help="OMP_NUM_THREADS per rank (default: the usable cores over the ranks, less the DataLoader workers)",
    )
    ranks.add_argument("--share-gpu", action="store_true", help="allow ranks to share one GPU (refused otherwise)")


def _count(minimum: int) -> Any:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; write e.g. 2") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}; write {minimum} or more")
        return value

    convert.__name__ = "int"
    return convert


def run(args: argparse.Namespace) -> int:
    import contextlib

    from perfsuite.cli.progress import waiting

    # On several ranks, a live line from the start (torch's import included) to the end of the launch; it is
    # redrawn once a second while this process only waits on the ranks. One rank draws its phases instead.
    ranks = args.nproc_per_node > 1 or args.scaling_rounds
    line = waiting(f"perfsuite run {args.workload} on {args.nproc_per_node} ranks") if ranks else None
    with line if line is not None else contextlib.nullcontext(None) as note:
        return _run(args, note)


def _run(args: argparse.Namespace, note: Any) -> int:
    import dataclasses
    from pathlib import Path

    from perfsuite.cli.hints import watchdog_from_args
    from perfsuite.core.options import period_steps, run_lengths
    from perfsuite.harness.runner import RunSpec
    from perfsuite.harness.runner import run as run_job
    from perfsuite.jobs.registry import is_job_target

    import_modules(args.imports)
    _check_setup_only(args)
    scale = args.scale or "smoke"
    steps, warmup, observe_steps = run_lengths(scale, args.steps, args.warmup, args.observe_steps)
    if is_job_target(args.workload):  # a user's job: only the knobs typed on the command line are asked of it
        from perfsuite.core.knobs import FLAT_KNOBS, Knobs

        defaults = argparse.ArgumentParser()
        add_run_arguments(defaults)
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
            period_steps=period_steps(args.period_steps, args.observe_steps),
            watchdog=watchdog_from_args(args),
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
            period_steps=period_steps(args.period_steps, args.observe_steps),
            watchdog=watchdog_from_args(args),
        )
    if args.loader_only:
        spec = dataclasses.replace(spec, loader_only=True)
    if args.predict_for and (args.nproc_per_node > 1 or args.scaling_rounds):
        from perfsuite.errors import KnobError

        raise KnobError("--predict-for predicts one process's loader against one GPU: drop --nproc-per-node")
    demand = demand_for(args)  # before any work: an unknown runner is bad input
    if args.nproc_per_node > 1 or args.scaling_rounds:
        from perfsuite.harness.ranks.launch import scaling

        note("launching and running (torchrun)")

        def log(line: str) -> None:
            note(line)
            print(f"perfsuite run: {line}", file=sys.stderr, flush=True)

        result = scaling(
            spec,
            args.nproc_per_node,
            args.scaling_rounds,
            share_gpus=args.share_gpu,
            omp_threads=args.omp_threads,
            imports=args.imports,
            log=log,
        )
    else:
        from perfsuite.cli.progress import phase_progress

        runs = []
        if args.setup_only:
            return _setup_only(args, spec)
        for _ in range(args.repeat):
            with phase_progress(args.workload) as show:
                runs.append(run_job(dataclasses.replace(spec, progress=show)))
        result = runs[-1]
        if args.out is not None:
            wrote = write_runs(args.out, args.workload, runs, overwrite=args.overwrite)
            print(f"perfsuite run: wrote {wrote}", file=sys.stderr)
    if demand is not None:
        from perfsuite.judge.starvation import predict, with_prediction

        result = with_prediction(result, predict(result, demand))
    print(result.to_json() if args.json else for_terminal(format_run(result)))
    return 0


def write_runs(path: Path, name: str, runs: list[Any], overwrite: bool = True) -> Path:
    """One run as a Result file; several as a baseline file holding them all (``runs``, oldest first), which
    ``perfsuite compare`` judges step times against with the variance between them. Atomic; without
    ``overwrite``, a file that appeared meanwhile is kept and the write refused."""
    import os

    from perfsuite.core.tmpfiles import write_json_atomic, write_text_atomic
    from perfsuite.judge.baselines import BASELINE_SCHEMA_VERSION

    publish = os.replace if overwrite else os.link
    try:
        if len(runs) == 1:
            return write_text_atomic(path, runs[0].to_json() + "\n", publish)
        payload = {
            "schema_version": BASELINE_SCHEMA_VERSION,
            "test_id": name,
            "result": runs[-1].to_dict(),
            "runs": [r.to_dict() for r in runs],
        }
        return write_json_atomic(path, payload, publish)
    except FileExistsError:
        raise PerfsuiteError(f"--out {path} appeared while the run ran; pass --overwrite to replace it") from None


def for_terminal(table: str) -> str:
    """The run's table folded to stdout's width (80 columns where it is no terminal, as in a CI log)."""
    from perfsuite.report.terminal import console_for, folded_lines

    return folded_lines(table, console_for(sys.stdout).width)


def format_run(result: Any) -> str:
    """The short table `perfsuite run` prints: metric names as thresholds write them, values in human units,
    one line for the GPU telemetry a CPU run cannot measure (perfsuite.report.terminal)."""
    from perfsuite.probes.synckinds import fixes, site_op
    from perfsuite.report.terminal import run_lines

    lines = run_lines(result)
    syncs = result.metric("syncs_per_step")
    lines += [
        f"    sync site: {site_op(site)} at {site['site']}, {site['per_step']:g}/step"
        + (f" ({site['seen']})" if site.get("seen") else "")
        for site in (syncs.detail.get("sites", []) if syncs.available else [])
    ]
    lines += [f"    {fix}" for fix in (fixes(syncs.detail.get("kinds")) if syncs.available else [])]
    lines += [f"  note: {note}" for note in result.notes]
    lines += [f"  stopped: {result.script.describe()}"] if result.script is not None else []
    from perfsuite.judge.contention import session_line

    contention = session_line({"this run": result})  # how busy the machine was (perfsuite.judge.contention)
    lines += [f"  {contention}"] if contention else []
    if result.ranks:
        from perfsuite.report.ranks import format_ranks

        lines.append(format_ranks(result))
    knobs = ", ".join(f"{k}={v}" for k, v in result.knobs.items())
    lines.append(f"  knobs: {knobs}")
    by_source: dict[str, list[str]] = {}
    for name, source in result.knob_sources.items():
        by_source.setdefault(source, []).append(name)
    lines += [f"  {source}: {', '.join(names)}" for source, names in by_source.items()]
    lines += [f"  phases: {result.phases.line()}"] if result.phases is not None else []  # where the run's time went
    return "\n".join(lines)


def _check_setup_only(args: argparse.Namespace) -> None:
    """``--setup-only`` with what needs steps is bad input, said before any work."""
    if args.setup_only and (args.out is not None or args.nproc_per_node > 1 or args.scaling_rounds or args.repeat > 1):
        from perfsuite.errors import PerfsuiteError

        raise PerfsuiteError(
            "--setup-only runs no step, so there is no Result to --out, repeat or launch on ranks; drop --setup-only "
            "or those options"
        )


def _setup_only(args: argparse.Namespace, spec: Any) -> int:
    """``--setup-only``: the set-up's phases, said to be only that (no step ran, no Result)."""
    import json

    from perfsuite.harness.runner import setup_only

    times = setup_only(spec)
    if args.json:
        record = {"setup_only": True, "workload": args.workload, "scale": spec.scale, "phases": times.to_list()}
        print(json.dumps(record))
    else:
        print(f"perfsuite run: --setup-only: stopped after the set-up, no step was run; {times.line()}")
    return 0
