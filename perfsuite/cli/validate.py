"""Every command's arguments checked before any work: one place, so a run of minutes never ends in a bad flag.

:func:`check` runs right after argparse, before the command: ranges (``--budget 1``), combinations
(``--min-rounds 9 --max-rounds 2``), names (an unknown job, before ranks are launched), cores
(``--nproc-per-node 64`` on 2 cores) and output paths (:mod:`perfsuite.core.outputs`: the parent exists,
no directory, writable, nothing replaced without ``--overwrite``). Each refusal is one PerfsuiteError naming
the flag and the value, and what to write instead; :func:`perfsuite.cli.main.main` prints it and exits 2.

:func:`add_shared_arguments` gives every command that writes files ``--parents`` (create missing parent
directories) and ``--overwrite`` where it has none, and ``run`` its ``--oversubscribe``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfsuite.core.outputs import check_output
from perfsuite.errors import PerfsuiteError

# The output-file flags of each command: (flag, attribute in the parsed arguments).
OUTPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "exec": (("--out", "out"),),
    "run": (("--out", "out"),),
    "doctor": (("--markdown", "markdown"), ("--json", "json_out"), ("--png", "png")),
    "ab": (("--report-md", "report_md"), ("--report-json", "report_json")),
    "compare": (("--png", "png"),),
    "monitor": (("--png", "png"), ("--json", "json")),
}


def written_files(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Every file or folder the command in ``args`` writes, by its flag: each is locked for the whole command
    (:func:`perfsuite.core.outlock.out_locks`), so two runs writing one Result, baseline or history refuse the
    second instead of keeping one run's unseen."""
    command = getattr(args, "subcommand", "")
    named = [(flag, getattr(args, attr, None)) for flag, attr in OUTPUTS.get(command, ())]
    if command == "accept":
        named.append(("BASE", getattr(args, "base", None)))
    elif command == "tune":
        named.append(("--out", getattr(args, "out", None)))
    elif command == "history":
        action = getattr(args, "action", "")
        named.append(("--history", getattr(args, "history", None) if action in ("add", "import") else None))
        named.append(("--out", getattr(args, "out", None) if action == "show" else None))
    return [(flag, path) for flag, path in named if isinstance(path, Path)]


# A round of `perfsuite ab`: 4 fresh pytest processes, each importing torch and pytest, then running warm-up and
# measured steps: never less than this each, on any machine we know of.
AB_MIN_RUN_S = 2.0
# A round of `perfsuite tune`: 4 runs of the target (in this process for a workload or job).
TUNE_MIN_RUN_S = 0.5


def add_shared_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """The flags :func:`check` reads that a command module does not declare itself."""
    have = parser._option_string_actions
    if command in OUTPUTS or command == "tune":
        if "--parents" not in have:
            parser.add_argument(
                "--parents", action="store_true", help="create the missing parent directories of the output files"
            )
        if command in OUTPUTS and "--overwrite" not in have:
            parser.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    if command == "run" and "--oversubscribe" not in have:
        parser.add_argument(
            "--oversubscribe",
            action="store_true",
            help="allow --nproc-per-node above the usable cores (the ranks then share cores)",
        )
    if command in ("run", "doctor") and "--deadline-floor" not in have:
        from perfsuite.cli.hints import add_watchdog_arguments

        add_watchdog_arguments(parser)


def check(args: argparse.Namespace) -> None:
    """Refuse bad arguments of ``args.subcommand`` before it starts: PerfsuiteError naming the flag and value."""
    checker = _CHECKS.get(getattr(args, "subcommand", ""))
    if checker is not None:
        checker(args)


# ------------------------------------------------------------------------------------------------ building blocks


def at_least(flag: str, value: float | None, minimum: float, example: str = "") -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= minimum):
        raise PerfsuiteError(f"{flag} {value}: write {minimum:g} or more{example}")


def above(flag: str, value: float | None, bound: float) -> None:
    if value is not None and not (math.isfinite(value) and value > bound):
        raise PerfsuiteError(f"{flag} {value}: write a number above {bound:g}")


def between(flag: str, value: float | None, low: float, high: float, *, closed_low: bool = True) -> None:
    if value is None:
        return
    ok = math.isfinite(value) and (low <= value if closed_low else low < value) and value < high
    if not ok:
        bracket = "[" if closed_low else "("
        raise PerfsuiteError(f"{flag} {value}: write a number in {bracket}{low:g}, {high:g})")


def rounds(min_rounds: int, max_rounds: int, low_flag: str = "--min-rounds") -> None:
    """``low_flag`` (ab's and tune's --min-rounds, doctor's --rounds) may not be above --max-rounds."""
    at_least("--max-rounds", max_rounds, 1)
    if min_rounds > max_rounds:
        raise PerfsuiteError(
            f"{low_flag} {min_rounds} is above --max-rounds {max_rounds}: at least {min_rounds} rounds cannot be "
            f"at most {max_rounds}; write {low_flag} {max_rounds} or less, or --max-rounds {min_rounds} or more"
        )


def budget(value: float, per_run_s: float, what: str) -> None:
    """A budget must fit one round (4 runs) at the least time a run can take."""
    round_s = 4 * per_run_s
    if not (math.isfinite(value) and value > 0):
        raise PerfsuiteError(f"--budget {value}: write a positive number of seconds, e.g. --budget 600")
    if value < round_s:
        raise PerfsuiteError(
            f"--budget {value:g}: one round is 4 {what} of at least {per_run_s:g} s each ({round_s:g} s), so none "
            f"would fit; write --budget {round_s:g} or more (e.g. --budget 600)"
        )


def outputs(command: str, args: argparse.Namespace) -> None:
    overwrite, parents = bool(getattr(args, "overwrite", False)), bool(getattr(args, "parents", False))
    for flag, attr in OUTPUTS.get(command, ()):
        check_output(flag, getattr(args, attr, None), overwrite=overwrite, parents=parents)


def workload_or_job(name: str, imports: list[str], flag_hint: str = "", what: str = "workload") -> None:
    """An unknown workload or job name, refused before anything is built or launched (with the names known)."""
    from perfsuite.cli.common import import_modules
    from perfsuite.jobs.registry import get_job_factory, job_names, workload_names

    import_modules(imports)
    if get_job_factory(name) is not None or name in workload_names():
        return
    jobs = ", ".join(job_names()) or "none registered (name the module that registers yours with --import)"
    raise PerfsuiteError(
        f"unknown {what} {name!r}: workloads are {', '.join(workload_names())}; jobs: {jobs}{flag_hint}"
    )


def perf_test_id(target: str) -> None:
    """A perf test's node id whose file does not exist is refused before pytest starts."""
    file = Path(target.split("::")[0])
    if not file.is_file():
        raise PerfsuiteError(
            f"{target}: {file} is not a file; give a perf test's node id, e.g. tests/perf/test_x.py::test_y"
        )


def run_knobs(args: argparse.Namespace) -> None:
    """The knob flags every run command shares: counts here; a workload's knobs as Knobs checks them (its messages
    say what to write), once the name is known to be a workload's."""
    at_least("--workers", args.num_workers, 0, ", e.g. --workers 2")
    at_least("--prefetch", args.prefetch_factor, 1)
    at_least("--batch-size", args.batch_size, 1)
    at_least("--log-interval", args.log_interval, 0)
    at_least("--eval-interval", args.eval_interval, 0)


def workload_knobs(args: argparse.Namespace) -> None:
    from perfsuite.cli.common import knobs_from_args
    from perfsuite.jobs.registry import is_job_target

    if not is_job_target(args.workload):
        knobs_from_args(argparse.Namespace(**vars(args)))  # a copy: it resolves the device in place


# ------------------------------------------------------------------------------------------------ per command


def _check_run(args: argparse.Namespace) -> None:
    run_knobs(args)
    if args.scaling_rounds and args.scaling_rounds < 3:
        raise PerfsuiteError(
            f"--scaling-rounds {args.scaling_rounds}: an interval needs 3 or more rounds; write --scaling-rounds 3 "
            "(or leave it out)"
        )
    if args.scaling_rounds and args.nproc_per_node < 2:
        raise PerfsuiteError(
            f"--scaling-rounds {args.scaling_rounds} with --nproc-per-node {args.nproc_per_node}: scaling compares "
            "one rank with N; write --nproc-per-node 2 or more"
        )
    if args.nproc_per_node > 1 and not args.oversubscribe:
        ranks_fit(args.nproc_per_node, args.num_workers)
    if args.repeat > 1 and (args.nproc_per_node > 1 or args.scaling_rounds):
        raise PerfsuiteError(
            f"--repeat {args.repeat} with --nproc-per-node {args.nproc_per_node}: repeated runs are one process's; "
            "launch the ranks once per run instead (leave --repeat out)"
        )
    outputs("run", args)
    workload_or_job(args.workload, args.imports)
    workload_knobs(args)


def ranks_fit(nproc: int, workers: int) -> None:
    """N ranks need N cores, one each, before their DataLoader workers; beyond that they only take turns."""
    from perfsuite.core.cores import usable_cores

    cores = usable_cores()
    if nproc <= cores.usable:
        return
    raise PerfsuiteError(
        f"--nproc-per-node {nproc}: {nproc} ranks need {nproc} cores (1 each, before their {workers} DataLoader "
        f"worker(s) each), and this machine has {cores.describe()}: {nproc}/{cores.usable} = "
        f"{nproc / cores.usable:.1f} ranks per core; write --nproc-per-node {cores.usable} or less, or pass "
        "--oversubscribe to run them anyway"
    )


def _check_doctor(args: argparse.Namespace) -> None:
    from perfsuite.plugin.capture import looks_like_test_id

    run_knobs(args)
    at_least("--rounds", args.rounds, 1)
    if args.max_rounds is not None:
        rounds(args.rounds, args.max_rounds, "--rounds")
    if args.target_samples_per_s is not None:
        above("--target-samples-per-s", args.target_samples_per_s, 0)
    outputs("doctor", args)
    from perfsuite.cli.doctor_script import is_script_command

    if is_script_command(args):  # -- python train.py ARGS: the script's own run says what is wrong with it
        return
    if looks_like_test_id(args.workload):
        perf_test_id(args.workload)
    else:
        workload_or_job(
            args.workload,
            args.imports,
            "; or give a perf test's node id, e.g. "
            "tests/perf/test_loader.py::test_loader_settings[gray_classifier-workers0]",
            what="workload or job",
        )
        workload_knobs(args)


def _check_exec(args: argparse.Namespace) -> None:
    command = [c for c in args.command if c != "--"][:1]
    if not command:
        raise PerfsuiteError("no command to run: write perfsuite exec [options] -- python train.py ARGS")
    if args.loader is not None:
        from perfsuite.jobs.script import LoaderChoice

        LoaderChoice.parse(args.loader)  # the form (NAME, NAME#N, N >= 1); which loaders exist shows as it runs
    at_least("--num-classes", args.num_classes, 1)
    if args.target_samples_per_s is not None:
        above("--target-samples-per-s", args.target_samples_per_s, 0)
    outputs("exec", args)


def _check_ab(args: argparse.Namespace) -> None:
    from perfsuite.cli.ab import split_own_options
    from perfsuite.judge.adaptive import ABRule

    own = argparse.Namespace(**vars(args))
    split_own_options(own)  # its own options may follow BASE HEAD
    at_least("--min-rounds", own.min_rounds, 0)
    rounds(own.min_rounds, own.max_rounds)
    budget(own.budget, AB_MIN_RUN_S, "fresh pytest runs")
    ABRule(factor=own.factor, margin=own.margin, alpha=own.alpha)  # its own checks, with their messages
    if not own.repo.is_dir():
        raise PerfsuiteError(f"--repo {own.repo}: not a directory; give the git repository (default: .)")
    outputs("ab", own)


def _check_tune(args: argparse.Namespace) -> None:
    from perfsuite.plugin.capture import looks_like_test_id
    from perfsuite.tools.tune.search import LOADER_KNOBS

    run_knobs(args)
    between("--delta", args.delta, 0.0, 1.0, closed_low=False)
    between("--alpha", args.alpha, 0.0, 1.0, closed_low=False)
    between("--batch-margin", args.batch_margin, 0.0, 1.0)
    at_least("--min-rounds", args.min_rounds, 1)
    rounds(args.min_rounds, args.max_rounds)
    budget(args.budget, TUNE_MIN_RUN_S, "runs")
    at_least("--max-workers", args.max_workers, 1)
    at_least("--max-batch", args.max_batch, 1)
    knobs = [k.strip() for k in args.knobs.split(",") if k.strip()]
    unknown = sorted(set(knobs) - set(LOADER_KNOBS))
    if unknown or not knobs:
        raise PerfsuiteError(
            f"--knobs {args.knobs!r}: cannot search {', '.join(unknown) or 'nothing'}; tune searches "
            f"{', '.join(LOADER_KNOBS)}"
        )
    _tune_requirements(args.require)
    _tune_paths(args)  # before the names: those import torch (seconds), a path needs nothing
    if looks_like_test_id(args.workload):
        perf_test_id(args.workload)
    else:
        workload_or_job(args.workload, args.imports)
        workload_knobs(args)
    _tune_clashes(args)


def _tune_requirements(items: list[str]) -> None:
    from perfsuite.cli.tune import _required
    from perfsuite.tools.tune.session import _required as checks

    checks(_required(items))


def _tune_paths(args: argparse.Namespace) -> None:
    """--out (a directory of tune files) and --pyproject (an existing file, edited in place)."""
    check_output("--out", args.out, overwrite=True, parents=args.parents, directory=True)
    if not args.no_thresholds:
        pyproject = Path(args.pyproject)
        if not pyproject.exists():
            raise PerfsuiteError(
                f"--pyproject {pyproject}: no such file; tune adds its bounds to an existing pyproject.toml: give "
                f"your project's, create it first (touch {pyproject}), or pass --no-thresholds"
            )
        check_output("--pyproject", pyproject, overwrite=True, overwrite_flag="--force")


def _tune_clashes(args: argparse.Namespace) -> None:
    """The tune file and the bounds this search would replace: refused before it, not after it."""
    from perfsuite.core.options import resolve_device
    from perfsuite.core.results import Fingerprint
    from perfsuite.tools.tune.lockin import tune_file_path

    if args.force:
        return
    fingerprint = Fingerprint.collect(resolve_device(args.device))
    tune_file = tune_file_path(args.out, fingerprint.key(), args.workload)
    if tune_file.exists():
        raise PerfsuiteError(
            f"--out {args.out}: {tune_file} exists (an earlier tuning of {args.workload} on this machine); pass "
            "--force to replace it, or give another --out"
        )
    if not args.no_thresholds:
        _thresholds_clash(Path(args.pyproject), fingerprint.machine_class, _test_key(args))


def _test_key(args: argparse.Namespace) -> str:
    from perfsuite.plugin.capture import looks_like_test_id

    if args.test:
        return str(args.test)
    if looks_like_test_id(args.workload):
        return str(args.workload)
    return "test_" + "".join(c if c.isalnum() else "_" for c in args.workload) + "_tuned"


def _thresholds_clash(pyproject: Path, machine: str, test_key: str) -> None:
    from perfsuite.core.toml import tomllib

    try:
        doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PerfsuiteError(
            f"--pyproject {pyproject}: cannot be read as TOML ({exc}); fix it, or pass --no-thresholds"
        ) from None
    table: Any = doc
    for key in ("tool", "perfsuite", "thresholds", machine, test_key):
        table = table.get(key) if isinstance(table, dict) else None
    if isinstance(table, dict) and table:
        raise PerfsuiteError(
            f"--pyproject {pyproject} already bounds {test_key!r} on {machine!r} ({', '.join(sorted(table))}); pass "
            "--force to replace them, --test NAME for another entry, or --no-thresholds"
        )


def _check_compare(args: argparse.Namespace) -> None:
    at_least("--factor", args.factor, 1, ", e.g. --factor 1.05 (a 5% change)")
    between("--alpha", args.alpha, 0.0, 1.0, closed_low=False)
    outputs("compare", args)


def _check_monitor(args: argparse.Namespace) -> None:
    above("--interval", args.interval, 0)
    if args.duration is not None:
        above("--duration", args.duration, 0)
    at_least("--gpu", args.gpu, 0)
    if args.pid is not None:
        at_least("--pid", args.pid, 1)
    outputs("monitor", args)


_CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "monitor": _check_monitor,
    "run": _check_run,
    "doctor": _check_doctor,
    "exec": _check_exec,
    "ab": _check_ab,
    "tune": _check_tune,
    "compare": _check_compare,
}
