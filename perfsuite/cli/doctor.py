"""``perfsuite doctor TARGET``: name a job's bottleneck and the fix, with evidence (perfsuite.tools.doctor).

TARGET is a reference workload (``face_parsing``, with the knob flags of ``perfsuite run``),
a registered job (``--import my_jobs faces``), or a perf test's node id
(``tests/perf/test_loader.py::test_loader_settings[gray_classifier-workers0]``), whose
perf_run calls are diagnosed instead of judged. Prints the report; ``--markdown``, ``--json``
and ``--png`` write files.
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
from perfsuite.cli.hints import watchdog_from_args
from perfsuite.errors import PerfsuiteError
from perfsuite.tools.doctor.decide import MAX_ROUNDS

HELP = "name a job's bottleneck and the fix, with measured evidence"
DESCRIPTION = __doc__.splitlines()[0] if __doc__ else HELP
DEFAULT_STEPS, DEFAULT_WARMUP, DEFAULT_OBSERVE = 20, 3, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p, json_flag=False)
    out = p.add_argument_group("doctor")
    out.add_argument(
        "--rounds", type=int, default=3, help="runs of the job, each beside its counterfactual (default 3)"
    )
    out.add_argument(
        "--max-rounds",
        type=int,
        default=None,
        metavar="N",
        help="more rounds, up to N, of the fixes whose intervals cannot yet say which helps most or whether it helps "
        f"(default {MAX_ROUNDS} within a --budget, which a script always has; else --rounds: none)",
    )
    out.add_argument(
        "--no-counterfactuals",
        action="store_true",
        help="skip the interleaved runs of the fixes (persistent workers, more or fewer workers, threads)",
    )
    out.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="MINUTES",
        help="the time the diagnosis may take: it runs the rounds and counterfactuals that fit and says what it left "
        "out (default 5 for a script, none otherwise)",
    )
    out.add_argument(
        "--target-samples-per-s", type=float, default=None, help="the samples/s the loader must feed (loader headroom)"
    )
    add_prediction_arguments(out)
    out.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report as markdown")
    out.add_argument("--json", type=Path, metavar="FILE", dest="json_out", help="also write the report as JSON")
    out.add_argument("--png", type=Path, metavar="FILE", help="also write a timeline of the steps")
    out.add_argument("--overwrite", action="store_true", help="replace --markdown/--json/--png files that exist")
    from perfsuite.cli.doctor_script import add_script_arguments

    add_script_arguments(p)


def _check_outputs(args: argparse.Namespace) -> None:
    for flag, path in (("--markdown", args.markdown), ("--json", args.json_out), ("--png", args.png)):
        if path is not None and path.exists() and not args.overwrite:
            raise PerfsuiteError(f"{flag} {path} exists; pass --overwrite to replace it, or give another path")
        if path is not None and path.exists() and path.is_dir():
            raise PerfsuiteError(f"{flag} {path} is a directory; give a file name")
    if args.rounds < 1:
        raise PerfsuiteError(f"--rounds {args.rounds}: write 1 or more")
    if args.budget is not None and not args.budget > 0:
        raise PerfsuiteError(f"--budget {args.budget:g}: write the minutes the diagnosis may take, above 0 (e.g. 5)")
    if args.target_samples_per_s is not None and not args.target_samples_per_s > 0:
        raise PerfsuiteError(f"--target-samples-per-s {args.target_samples_per_s}: write a rate above 0")


def _predicted(diagnoses: list[Any], demand: Any) -> None:
    """Each diagnosis notes its loader's supply against the runner's demand (perfsuite.judge.starvation)."""
    from perfsuite.judge.starvation import predict

    for d in diagnoses:
        p = predict(d.results[-1], demand)
        d.notes.append(
            p.describe() if hasattr(p, "describe") else f"predicted for {demand.runner}: unavailable: {p.reason}"
        )


def _progress() -> tuple[Any, Any]:
    """(update(text), stop()): one live line on a terminal, with the time left from the first round; nothing
    under CI or when piped (perfsuite.cli.progress)."""
    from perfsuite.cli.progress import live_line

    line = live_line("perfsuite doctor")
    if line is None:
        return (lambda text: None), (lambda: None)
    return line.update, line.stop


def _spec(args: argparse.Namespace) -> Any:
    from perfsuite.core.knobs import FLAT_KNOBS, Knobs
    from perfsuite.harness.runner import RunSpec
    from perfsuite.jobs.registry import get_job_factory, is_job_target, job_names, workload_names

    import_modules(args.imports)
    scale = args.scale or "smoke"
    lengths = {
        "steps": args.steps or DEFAULT_STEPS,
        "warmup": args.warmup if args.warmup is not None else DEFAULT_WARMUP,
        "observe_steps": args.observe_steps if args.observe_steps is not None else DEFAULT_OBSERVE,
        "target_samples_per_s": args.target_samples_per_s,
        "watchdog": watchdog_from_args(args),
    }
    if is_job_target(args.workload):
        defaults = argparse.ArgumentParser()
        add_run_arguments(defaults, json_flag=False)
        default = vars(defaults.parse_args([args.workload]))
        asked = {k: getattr(args, k) for k in FLAT_KNOBS if hasattr(args, k) and getattr(args, k) != default[k]}
        device = knobs_from_args(args).device
        return RunSpec(
            args.workload, scale=scale, knobs=Knobs(device=device), job_knobs=asked, seed=args.seed, **lengths
        )
    if get_job_factory(args.workload) is None and args.workload not in workload_names():
        jobs = ", ".join(job_names()) or "none registered (register one, then name its module with --import)"
        raise PerfsuiteError(
            f"unknown workload or job {args.workload!r}: workloads are {', '.join(workload_names())}; jobs: {jobs}; "
            "or give a perf test's node id, e.g. "
            "tests/perf/test_loader.py::test_loader_settings[gray_classifier-workers0]"
        )
    return RunSpec(
        args.workload,
        scale=scale,
        knobs=knobs_from_args(args),
        seed=args.seed,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        **lengths,
    )


def run(args: argparse.Namespace) -> int:
    import dataclasses

    _check_outputs(args)
    demand = demand_for(args)  # before any work: a runner with no demand file is bad input
    update, stop = _progress()  # before torch's import: the live line shows within a second or two
    try:
        from perfsuite.core.tmpfiles import write_text_atomic
        from perfsuite.plugin.capture import capture_test, looks_like_test_id
        from perfsuite.tools.doctor import diagnose, report
    except BaseException:
        stop()
        raise
    diagnoses = []
    counterfactuals = not args.no_counterfactuals
    from perfsuite.cli.doctor_script import (
        diagnose_command,
        diagnose_spec,
        is_script_command,
        is_script_spec,
        rounds_within,
    )

    failed: list[BaseException] = []
    try:
        if is_script_command(args):
            lengths = (DEFAULT_STEPS, DEFAULT_WARMUP, DEFAULT_OBSERVE)
            diagnoses.append(diagnose_command(args, counterfactuals, update, lengths))
        elif looks_like_test_id(args.workload):

            def handle(spec: Any, result_id: str) -> Any:
                spec = dataclasses.replace(
                    spec,
                    steps=args.steps or max(spec.steps, DEFAULT_STEPS),
                    warmup=args.warmup if args.warmup is not None else max(spec.warmup, DEFAULT_WARMUP),
                    observe_steps=args.observe_steps or max(spec.observe_steps, DEFAULT_OBSERVE),
                    target_samples_per_s=args.target_samples_per_s,
                    watchdog=watchdog_from_args(args, spec.watchdog),
                )
                say = lambda s: update(f"{result_id}: {s}")  # noqa: E731
                try:  # a script's runs each in a fresh process (perfsuite.tools.doctor_script)
                    d = (
                        diagnose_spec(spec, result_id, args, counterfactuals, say)
                        if is_script_spec(spec)
                        else diagnose(
                            spec, result_id, args.rounds, counterfactuals, say, *rounds_within(args, args.budget)
                        )
                    )
                except BaseException as exc:
                    failed.append(exc)
                    raise
                diagnoses.append(d)
                return d.results[-1]

            import_modules(args.imports)
            capture_test(args.workload, handle)
            if failed or not diagnoses:  # never an empty diagnosis with exit 0
                from perfsuite.cli.doctor_script import no_diagnosis

                raise no_diagnosis(args.workload, failed)
        else:
            spec = _spec(args)
            budget, most = rounds_within(args, args.budget)
            diagnoses.append(diagnose(spec, args.workload, args.rounds, counterfactuals, update, budget, most))
    except KeyboardInterrupt:
        stop()
        print("perfsuite doctor: interrupted; nothing written", file=sys.stderr)
        return 130
    finally:
        stop()
    if demand is not None:
        _predicted(diagnoses, demand)
    from perfsuite.report import terminal

    text = "\n\n".join(report.format_terminal(d) for d in diagnoses)
    console = terminal.console_for(sys.stdout)
    text = terminal.folded_lines(text, console.width)  # each line's continuation indented under it (80 in a log)
    if terminal.is_terminal(sys.stdout):  # headings in bold, outcomes coloured
        console.print(terminal.styled_lines(text.splitlines()))
    else:
        print(text)
    if args.markdown:
        write_text_atomic(args.markdown, report.format_markdown(diagnoses))
        print(f"wrote {args.markdown}")
    if args.json_out:
        write_text_atomic(args.json_out, report.to_json(diagnoses))
        print(f"wrote {args.json_out}")
    if args.png:
        try:
            report.write_png(diagnoses, args.png)
            print(f"wrote {args.png}")
        except ImportError:
            print(f"did not write {args.png}: the timeline needs matplotlib (pip install perfsuite[charts])")
    return 0
