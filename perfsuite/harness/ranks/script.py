"""A user's DDP script on N ranks, unchanged: ``perfsuite exec --nproc-per-node N -- python train.py ARGS``.

The script is launched through torch's own launcher, ``python -m torch.distributed.run
--standalone --nproc-per-node N``, so each rank gets the environment torchrun sets
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``) and the script
calls ``init_process_group`` itself, as it does under torchrun. Each rank runs
:mod:`perfsuite.harness.ranks.main`, which runs the script under the same phases as
``perfsuite exec`` (:mod:`perfsuite.harness.script.drive`) with every probe plus the rank probe
(:mod:`perfsuite.probes.ranks`), and writes its :class:`perfsuite.harness.ranks.merge.RankReport`
to the run directory. This process merges them exactly as ``perfsuite run --nproc-per-node``
does (:func:`perfsuite.harness.ranks.merge.merge`): the job's figures, each rank's own, the
straggler by arrival skew at DDP's collectives. Merging here, not in rank 0, leaves the
script's process group to the script. A rank that dies or hangs fails the run naming it,
and nothing of the launch is left running (:class:`perfsuite.harness.ranks.supervise.Supervisor`).

``scaling_efficiency`` needs ``scaling_rounds``: interleaved launches of the script on one
rank and on N, at the same per-rank batch and threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfsuite.core.results import Metric, Result
from perfsuite.errors import PerfsuiteError, RankError, ScriptError
from perfsuite.harness.runner import RunSpec
from perfsuite.harness.watchdog import WatchdogConfig
from perfsuite.jobs.script import Script

_SCRIPT_FIELDS = ("loader", "name", "criterion", "num_classes", "ignore_index", "target_kind", "flip_pairs")
_SPEC_FIELDS = ("steps", "warmup", "observe_steps", "sol_steps", "period_steps")


def script_argv(script: Script) -> list[str]:
    """The command line that makes ``script`` again in another process (its path absolute)."""
    if script.module is not None:
        return ["-m", *script.argv]
    return [str(script.path), *script.argv[1:]]


def _plan(script: Script, spec: RunSpec, probes: bool) -> dict[str, Any]:
    fields = {k: getattr(script, k) for k in _SCRIPT_FIELDS}
    if fields["flip_pairs"] is not None:
        fields["flip_pairs"] = [list(p) for p in fields["flip_pairs"]]
    return {
        "script": {"argv": script_argv(script), **fields},
        "spec": {k: getattr(spec, k) for k in _SPEC_FIELDS},
        "watchdog": dataclasses.asdict(spec.watchdog),
        "probes": probes,
        "sys_path": [os.getcwd(), *[p for p in sys.path if p]],
    }


def launch_script(
    script: Script,
    spec: RunSpec,
    nproc: int,
    omp_threads: int,
    probes: bool = True,
    doctor: dict[str, Any] | None = None,
) -> Result:
    """One torchrun launch of ``script`` on ``nproc`` ranks: the merged Result (per-rank figures in ``ranks``).

    ``doctor``: for perfsuite doctor, ``{"override": ...}`` (the training loader's arguments to set, or None);
    rank 0's step ledger and training loader facts are put back into it as ``ledger`` and ``loader``.
    """
    from perfsuite.core.cores import usable_cores
    from perfsuite.harness.ranks.merge import merge
    from perfsuite.harness.ranks.supervise import Supervisor

    run_dir = Path(tempfile.mkdtemp(prefix="perfsuite-script-ranks-"))
    plan = _plan(script, spec, probes)
    if doctor is not None:
        plan["doctor"] = {"override": doctor.get("override")}
    (run_dir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": str(omp_threads)}
    from perfsuite.harness.ranks.launch import torchrun_command

    command = torchrun_command(nproc, run_dir)  # its --log-dir keeps torchelastic_* folders out of TMPDIR
    log_path = run_dir / "torchrun.log"
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            Supervisor(proc, run_dir, nproc, spec.watchdog).wait(log_path)
        reports = []
        for k in range(nproc):
            path = run_dir / f"report{k}.pkl"
            if not path.is_file():
                raise RankError(f"rank {k} of {script.command()} exited 0 but wrote no report", k, "")
            reports.append(pickle.loads(path.read_bytes()))  # our own ranks' files, in our own temp dir
        if doctor is not None:
            doctor.update(json.loads((run_dir / "doctor0.json").read_text(encoding="utf-8")))
        return merge(reports, usable_cores().usable)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def run_script_distributed(
    script: Script,
    spec: RunSpec,
    nproc: int,
    *,
    omp_threads: int | None = None,
    scaling_rounds: int = 0,
    log: Callable[[str], None] = lambda s: None,
) -> Result:
    """``script`` on ``nproc`` ranks, merged; with ``scaling_rounds``, ``scaling_efficiency`` from interleaved
    one-rank and N-rank launches (order alternating 1,N then N,1 so drift cancels)."""
    from perfsuite.harness.ranks.launch import plan_launch
    from perfsuite.harness.ranks.merge import scaling_efficiency

    if isinstance(scaling_rounds, bool) or not isinstance(scaling_rounds, int) or scaling_rounds < 0:
        raise PerfsuiteError(f"--scaling-rounds {scaling_rounds!r}: write a whole number of rounds (3 for an interval)")
    if scaling_rounds and nproc < 2:
        raise PerfsuiteError(
            f"--scaling-rounds {scaling_rounds} with --nproc-per-node {nproc}: scaling compares one rank with N, "
            "so write --nproc-per-node 2 or more"
        )
    threads = plan_launch(nproc, "cpu", 0, omp_threads=omp_threads).omp_threads
    main = launch_script(script, spec, nproc, threads)
    if not scaling_rounds:
        why = "not measured: it needs interleaved one-rank and N-rank launches (--scaling-rounds 3)"
        efficiency = Metric.unavailable("scaling_efficiency", why, "fraction")
        return dataclasses.replace(main, metrics={**main.metrics, "scaling_efficiency": efficiency})
    lite = dataclasses.replace(spec, observe_steps=0, sol_steps=0, period_steps=0)
    pairs = []
    for k in range(scaling_rounds):
        figures = {}
        for n in (1, nproc) if k % 2 == 0 else (nproc, 1):
            log(f"scaling round {k + 1}/{scaling_rounds}: {n} rank(s)")
            figures[n] = float(launch_script(script, lite, n, threads, probes=False).value("samples_per_s"))
        pairs.append((figures[1], figures[nproc]))
    return dataclasses.replace(main, metrics={**main.metrics, "scaling_efficiency": scaling_efficiency(pairs, nproc)})


def run_rank(plan: dict[str, Any], run_dir: Path, rank: int, progress: Any) -> None:
    """In one rank (from :func:`perfsuite.harness.ranks.main.run_plan`): run the script, write this rank's report."""

    from perfsuite.core.tmpfiles import write_bytes_atomic
    from perfsuite.harness.child import TrainingLoaderProbe, loader_facts
    from perfsuite.harness.runner import default_probes
    from perfsuite.harness.runner import run as run_job
    from perfsuite.harness.script.loader_args import LoaderCalls, Override
    from perfsuite.probes.ranks import RankProbe
    from perfsuite.probes.stepledger import StepLedgerProbe

    raw = plan["script"]
    flips = raw.get("flip_pairs")
    script = Script(raw["argv"], **{k: raw.get(k) for k in _SCRIPT_FIELDS if k != "flip_pairs"}, flip_pairs=flips)
    spec = RunSpec(script, watchdog=WatchdogConfig(**plan["watchdog"]), **plan["spec"])
    probe = RankProbe()
    probe.progress = progress
    probes: list[Any] = ([*default_probes()] if plan.get("probes", True) else []) + [probe]
    doctor = plan.get("doctor")
    calls = LoaderCalls(Override.from_dict(doctor["override"]) if doctor and doctor.get("override") else None)
    ledger, loader = StepLedgerProbe(), TrainingLoaderProbe(calls)
    if doctor is not None:
        probes += [ledger, loader]
    try:
        with calls.installed() if doctor is not None else contextlib.nullcontext():
            result = run_job(spec, probes)
    except ScriptError as exc:  # the launcher shows the message: the script's own traceback goes with it
        if not exc.script_traceback:
            raise
        text = str(exc).replace("its traceback is above", "its traceback is below")
        raise ScriptError(f"{text}\n{exc.script_traceback.rstrip()}") from None
    from perfsuite.harness.ranks.merge import rank_report

    report = rank_report(rank, result, probe)
    if doctor is not None and rank == 0:
        facts = {"ledger": ledger.summary(), "loader": loader_facts(calls, loader)}
        write_bytes_atomic(run_dir / "doctor0.json", json.dumps(facts, default=repr).encode())
    write_bytes_atomic(run_dir / f"report{rank}.pkl", pickle.dumps(report))
