"""A job on N ranks through torch.distributed's own launcher, and one Result from all of them.

``run_distributed(spec, nproc)`` launches ``python -m torch.distributed.run
--standalone --nproc-per-node N -m perfsuite.harness.ranks.main RUN_DIR``:
torchrun's standalone rendezvous picks a free port (never a fixed one), each
rank joins the process group (gloo on CPU, NCCL on CUDA, one GPU per rank:
ranks that would share one are refused unless asked), runs the runner's
phases on its shard with DDP, and rank 0 writes the merged Result
(perfsuite.harness.ranks.merge). ``OMP_NUM_THREADS`` is set explicitly so that
ranks x (threads + DataLoader workers) fit the usable cores
(perfsuite.harness.ranks.ddp.plan_threads). A rank that dies or hangs fails the run
with each rank's stacks, and nothing of the launch is left running
(perfsuite.harness.ranks.supervise).

What crosses into the ranks is JSON (:class:`RankRun`): a workload or job by
name, or a job factory / mutate function by module and qualified name (each
rank imports it), so it must be defined at module level. A user's job
factory is called in each rank after the process group exists: it builds
its DistributedSampler and DistributedDataParallel as its torchrun script does.

``scaling(spec, nproc, rounds)`` adds ``scaling_efficiency``: interleaved
launches on one rank and on N ranks at the same per-rank batch and threads.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core.results import Result
from perfsuite.errors import JobError, PerfsuiteError
from perfsuite.harness.runner import RunSpec
from perfsuite.harness.watchdog import WatchdogConfig

Reference = dict[str, str]


# --------------------------------------------------------------------------- what crosses into the ranks


def reference(obj: Any, what: str) -> Reference:
    """How a rank finds ``obj`` again: a registered name, or a module-level object by module and qualified name."""
    from perfsuite.jobs.contract import Job
    from perfsuite.jobs.workload import Workload

    if isinstance(obj, str):
        return {"name": obj}
    if isinstance(obj, Job):
        raise JobError(
            f"{what}: a Job object cannot cross into the rank processes, and its DataLoader and model must be "
            "built in each rank anyway; pass the job factory instead (a module-level function "
            "`def my_job(device): ... return perfsuite.Job(...)`), which each rank calls after joining the "
            "process group"
        )
    if isinstance(obj, Workload):
        obj = type(obj)
    qualname, module = getattr(obj, "__qualname__", None), getattr(obj, "__module__", None)
    if not qualname or not module or "<" in qualname:
        raise PerfsuiteError(
            f"{what} {obj!r} is a lambda or is defined inside a function; each rank imports it by name, so "
            "define it at module level (and give its module's directory on sys.path or --import)"
        )
    try:
        source = inspect.getsourcefile(obj) or ""
    except TypeError:
        source = ""
    return {"module": module, "qualname": qualname, "file": source}


def resolve_reference(ref: Reference) -> Any:
    """The object a :func:`reference` names: imported by module name, else loaded from its file."""
    if "name" in ref:
        return ref["name"]
    module: Any = None
    if ref["module"] != "__main__":
        try:
            module = importlib.import_module(ref["module"])
        except ImportError:
            module = None
    if module is None:
        path = ref.get("file") or ""
        if not path or not Path(path).is_file():
            raise PerfsuiteError(
                f"cannot import {ref['module']}.{ref['qualname']} in the rank process (no module of that name on "
                f"sys.path, and its file {path!r} is not there); put it in an importable module"
            )
        name = ref["module"] if ref["module"] != "__main__" else f"perfsuite_rank_main_{Path(path).stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    obj = module
    for part in ref["qualname"].split("."):
        obj = getattr(obj, part)
    return obj


def import_modules(names: Sequence[str]) -> None:
    """Import the modules that register the jobs a run names (``perfsuite run --import``), in each rank."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PerfsuiteError(f"import {name} in the rank process: {exc}") from exc


@dataclass(frozen=True)
class RankRun:
    """One run every rank makes, as plain JSON (see the module docstring)."""

    workload: Reference
    job: bool = False
    scale: str = "smoke"
    knobs: dict[str, Any] = field(default_factory=dict)  # flat knobs of a reference workload; device set per rank
    job_knobs: dict[str, Any] = field(default_factory=dict)
    steps: int = 20
    warmup: int = 3
    observe_steps: int = 4
    sol_steps: int = 5
    seed: int = 0
    cache_dir: str | None = None
    watchdog: dict[str, Any] = field(default_factory=dict)
    faults: tuple[str, ...] = ()
    mutate: Reference | None = None
    probes: bool = True  # False: only the rank probe (the scaling rounds)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "faults": list(self.faults)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RankRun:
        return cls(**{**data, "faults": tuple(data.get("faults", ()))})

    def spec(self, rank: int, world: int, device: str) -> RunSpec:
        """The RunSpec this rank runs: for a reference workload, sharded and wrapped in DDP; a user's job, checked."""
        from perfsuite.core.knobs import Knobs
        from perfsuite.harness.faults.catalog import get_fault
        from perfsuite.harness.ranks.ddp import check_job, shard_pipeline, wrap_pipeline

        target = resolve_reference(self.workload)
        user_mutate = resolve_reference(self.mutate) if self.mutate else None
        mutate: Callable[[Any], None]
        if self.job:
            knobs = Knobs(device=device)

            def mutate(job: Any) -> None:
                if user_mutate is not None:
                    user_mutate(job)
                check_job(job, world)

        else:
            knobs = Knobs.from_flat(**{**self.knobs, "device": device})
            faults = [get_fault(name) for name in self.faults]

            def mutate(pipeline: Any) -> None:
                shard_pipeline(pipeline, rank, world, self.seed)
                for fault in faults:
                    fault.mutate(pipeline)
                if user_mutate is not None:
                    user_mutate(pipeline)
                wrap_pipeline(pipeline)

        return RunSpec(
            target,
            scale=self.scale,
            knobs=knobs,
            steps=self.steps,
            warmup=self.warmup,
            observe_steps=self.observe_steps,
            seed=self.seed,
            cache_dir=Path(self.cache_dir) if self.cache_dir else None,
            mutate=mutate,
            job_knobs=dict(self.job_knobs),
            watchdog=WatchdogConfig(**self.watchdog),
            sol_steps=self.sol_steps,
        )


def rank_run(spec: RunSpec, faults: Sequence[str] = (), probes: bool = True) -> RankRun:
    """A RunSpec as a :class:`RankRun`. Fault knob changes are already in ``spec.knobs``; ``faults`` names the
    faults whose code changes each rank applies to its pipeline (perfsuite.harness.faults.catalog)."""
    from perfsuite.jobs.registry import is_job_target

    job = is_job_target(spec.workload)
    if job and faults:
        raise PerfsuiteError(
            f"faults {', '.join(faults)} are injected into perfsuite's reference workloads; a user's job runs its "
            "own code"
        )
    return RankRun(
        workload=reference(spec.workload, "the workload"),
        job=job,
        scale=spec.scale,
        knobs={} if job else spec.knobs.flat(),
        job_knobs=dict(spec.job_knobs),
        steps=spec.steps,
        warmup=spec.warmup,
        observe_steps=spec.observe_steps,
        sol_steps=spec.sol_steps,
        seed=spec.seed,
        cache_dir=str(spec.cache_dir) if spec.cache_dir else None,
        watchdog=dataclasses.asdict(spec.watchdog),
        faults=tuple(faults),
        mutate=reference(spec.mutate, "mutate") if spec.mutate is not None else None,
        probes=probes,
    )


# --------------------------------------------------------------------------- launching


@dataclass(frozen=True)
class Launch:
    """How the ranks are started: their count, devices, threads and backend (see :func:`plan_launch`)."""

    nproc: int
    devices: tuple[str, ...]
    backend: str
    omp_threads: int
    cores: int


def plan_launch(
    nproc: int,
    device: str,
    workers: int = 0,
    share_gpus: bool = False,
    omp_threads: int | None = None,
    gpu_count: int | None = None,
    cores: int | None = None,
) -> Launch:
    """Devices, backend and threads for ``nproc`` ranks on ``device`` (``cpu``, ``cuda`` or ``cuda:N``)."""
    from perfsuite.core.cores import usable_cores
    from perfsuite.harness.ranks.ddp import backend_for, plan_threads, rank_devices

    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise PerfsuiteError(f"nproc_per_node={nproc!r}; write a whole number of ranks, 1 or more")
    bad_threads = isinstance(omp_threads, bool) or not isinstance(omp_threads, int) or omp_threads < 1
    if omp_threads is not None and bad_threads:
        raise PerfsuiteError(f"omp_threads={omp_threads!r}; write a whole number of threads per rank, 1 or more")
    if gpu_count is None:
        import torch

        gpu_count = torch.cuda.device_count() if device.startswith("cuda") else 0
    cores = usable_cores().usable if cores is None else cores
    devices = rank_devices(device, nproc, gpu_count, share_gpus)
    threads = omp_threads if omp_threads is not None else plan_threads(nproc, workers, cores)
    return Launch(nproc, tuple(devices), backend_for(devices[0]), threads, cores)


def launch(
    runs: Sequence[RankRun],
    nproc: int,
    *,
    device: str = "cpu",
    share_gpus: bool = False,
    omp_threads: int | None = None,
    imports: Sequence[str] = (),
) -> list[Result]:
    """Run ``runs`` one after another on ``nproc`` ranks in one torchrun launch; one merged Result per run."""
    from perfsuite.harness.ranks.supervise import Supervisor

    if not runs:
        return []
    workers = max(int(r.knobs.get("num_workers") or 0) for r in runs)
    plan = plan_launch(nproc, device, workers, share_gpus, omp_threads)
    run_dir = Path(tempfile.mkdtemp(prefix="perfsuite-ranks-"))
    payload = {
        "runs": [r.to_dict() for r in runs],
        "devices": list(plan.devices),
        "backend": plan.backend,
        "imports": list(imports),
        "sys_path": [os.getcwd(), *[p for p in sys.path if p]],
    }
    (run_dir / "plan.json").write_text(json.dumps(payload), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": str(plan.omp_threads)}
    command = torchrun_command(nproc, run_dir)
    log_path = run_dir / "torchrun.log"
    watchdog = WatchdogConfig(**runs[0].watchdog)
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            Supervisor(proc, run_dir, nproc, watchdog).wait(log_path)
        results = []
        for i in range(len(runs)):
            path = run_dir / "results" / f"{i}.json"
            results.append(Result.from_json(path.read_text(encoding="utf-8")))
        return results
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def run_distributed(
    spec: RunSpec,
    nproc: int,
    *,
    faults: Sequence[str] = (),
    share_gpus: bool = False,
    omp_threads: int | None = None,
    imports: Sequence[str] = (),
) -> Result:
    """One run of ``spec`` on ``nproc`` ranks: the merged Result (per-rank figures in ``Result.ranks``)."""
    from perfsuite.core.results import Metric

    run = rank_run(spec, faults)
    (result,) = launch(
        [run], nproc, device=spec.knobs.device, share_gpus=share_gpus, omp_threads=omp_threads, imports=imports
    )
    unmeasured = Metric.unavailable(
        "scaling_efficiency",
        "not measured: it needs interleaved one-rank and N-rank runs (scaling_rounds=3, --scaling-rounds 3)",
        "fraction",
    )
    return dataclasses.replace(result, metrics={**result.metrics, "scaling_efficiency": unmeasured})


def scaling(
    spec: RunSpec,
    nproc: int,
    rounds: int,
    *,
    faults: Sequence[str] = (),
    share_gpus: bool = False,
    omp_threads: int | None = None,
    imports: Sequence[str] = (),
    log: Callable[[str], None] = lambda s: None,
) -> Result:
    """:func:`run_distributed`, plus ``scaling_efficiency`` from ``rounds`` interleaved one-rank and N-rank launches.

    Every launch runs the same spec with the N-rank run's threads per rank, so
    one rank gets what each of N ranks gets (one GPU each, or its share of the
    cores). Rounds alternate their order (1,N then N,1) so drift cancels.
    """
    from perfsuite.harness.ranks.merge import scaling_efficiency

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise PerfsuiteError(f"scaling_rounds={rounds!r}; write a whole number of rounds (3 or more for an interval)")
    if rounds and nproc < 2:
        raise PerfsuiteError(
            f"scaling_rounds={rounds} with nproc_per_node={nproc}: scaling compares one rank with N, so write "
            "nproc_per_node=2 or more"
        )
    from perfsuite.jobs.registry import is_job_target

    workers = 0 if is_job_target(spec.workload) else int(spec.knobs.loader.num_workers)
    threads = plan_launch(nproc, spec.knobs.device, workers, share_gpus, omp_threads).omp_threads
    main = run_distributed(spec, nproc, faults=faults, share_gpus=share_gpus, omp_threads=threads, imports=imports)
    if rounds == 0:
        return main
    lite = dataclasses.replace(rank_run(spec, faults, probes=False), observe_steps=0, sol_steps=0)
    pairs = []
    for k in range(rounds):
        order = (1, nproc) if k % 2 == 0 else (nproc, 1)
        figures = {}
        for n in order:
            log(f"scaling round {k + 1}/{rounds}: {n} rank(s)")
            (r,) = launch(
                [lite], n, device=spec.knobs.device, share_gpus=share_gpus, omp_threads=threads, imports=imports
            )
            figures[n] = float(r.value("samples_per_s"))
        pairs.append((figures[1], figures[nproc]))
    metrics = {**main.metrics, "scaling_efficiency": scaling_efficiency(pairs, nproc)}
    return dataclasses.replace(main, metrics=metrics)


def torchrun_command(nproc: int, run_dir: Path) -> list[str]:
    """``torch.distributed.run`` of :mod:`perfsuite.harness.ranks.main` on ``nproc`` local ranks, reading its plan
    from ``run_dir`` (a job's ranks and a script's alike)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a local rendezvous on a free port chosen by torchrun: never a fixed port
        f"--nproc-per-node={nproc}",
        "--max-restarts=0",
        f"--log-dir={run_dir / 'elastic'}",  # else torchrun leaves a torchelastic_* folder in TMPDIR per launch
        "-m",
        "perfsuite.harness.ranks.main",
        str(run_dir),
    ]
