"""``perfsuite doctor``: one command that names a job's bottleneck in the seeds' terms, with evidence, and the fix.

It runs the job a few times (``rounds``) with every probe, the loader ledger and
the step ledger (:mod:`perfsuite.probes.stepledger`) attached, and where a
change can be measured it runs the changed job interleaved with the unchanged
one (ABAB... rounds, so the machine's drift falls on both):

* **the per-step time ledger**, adding up to the window's mean step, each part
  between 0 and 100% of it: the wait for the batch and any periodic work (an
  evaluation every N steps) from the window's own steps; the step's own work
  split by ratios, never by subtracting figures taken under other conditions
  (the syncs' and copies' share of the observed steps; compute as the step fed
  a cached batch when it fits in the window's own work, else unavailable);
* **the data-wait band** as TensorFlow's input-pipeline analyzer draws it (< 5%
  not input-bound, 5-20% moderately, > 20% highly), with a bootstrap interval;
  an interval spanning an edge is said in the evidence, never as the headline;
* **input efficiency** with an interval over the runs and their steps, periodic
  work left out, and the machine's load over the runs (CPU pressure, steal, run
  queue; the Result's own contention figures where it records them);
* **the loader's stages** per sample, each mapped to its fix, and one sentence
  reconciling the headroom with the data wait;
* **the fixes the evidence points at, tried** as counterfactuals interleaved
  with the job as it is (persistent workers, more or fewer workers, fewer
  threads), each finding's gain predicted from the ledger beside the measured.

The result is a plain dict (``to_dict``) that :mod:`perfsuite.report.doctor`
renders for people (terminal, markdown), as JSON, and as a timeline PNG.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.runner import INPUT_BANDS, RunSpec, input_band
from perfsuite.judge.contention import session_line as contention_line
from perfsuite.probes.periods import Epochs

DEFAULT_ROUNDS = 3
CONFIDENCE = 0.95
BOOTSTRAP = 2000


# --------------------------------------------------------------------------- statistics


def wait_band(fetch_ms: Sequence[Sequence[float]], host_ms: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The window's data-wait share with its interval, and the band, called only when the interval clears its edges."""
    pairs = [list(zip(f, h)) for f, h in zip(fetch_ms, host_ms)]

    def share(groups: list[list[Any]]) -> float:
        fetched = sum(p[0] for g in groups for p in g)
        total = sum(p[1] for g in groups for p in g)
        return fetched / total if total > 0 else 0.0

    import numpy as np

    rng = np.random.default_rng(1)
    estimate = share(pairs)
    draws = []
    for _ in range(BOOTSTRAP):
        draws.append(share([[g[i] for i in rng.integers(0, len(g), len(g))] for g in pairs if g]))
    lo, hi = (float(x) for x in np.percentile(draws, [(1 - CONFIDENCE) / 2 * 100, (1 + CONFIDENCE) / 2 * 100]))
    low_band, high_band = input_band(lo), input_band(hi)
    called = low_band == high_band
    edges = [limit for limit, _ in INPUT_BANDS if lo < limit <= hi]
    return {
        "share": estimate,
        "low": lo,
        "high": hi,
        "confidence": CONFIDENCE,
        "band": low_band if called else None,
        "between": None if called else f"{low_band} .. {high_band}",
        "edge": edges[0] if edges else None,
        "steps": sum(len(g) for g in pairs),
    }


def ratio_interval(base: Sequence[float], head: Sequence[float]) -> dict[str, Any]:
    """Interleaved pairs of one figure (samples/s per run): the mean ratio head/base and its t-interval."""
    from scipy.stats import t as t_dist

    logs = [math.log(h / b) for b, h in zip(base, head) if b > 0 and h > 0]
    n = len(logs)
    if n == 0:
        return {"pairs": 0}
    mean = sum(logs) / n
    if n < 2:
        return {"pairs": n, "ratio": math.exp(mean), "low": None, "high": None}
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = float(t_dist.ppf((1 + CONFIDENCE) / 2, n - 1)) * sd / math.sqrt(n)
    return {"pairs": n, "ratio": math.exp(mean), "low": math.exp(mean - half), "high": math.exp(mean + half)}


# --------------------------------------------------------------------------- counterfactuals


def clone_loader(loader: Any, num_workers: int, persistent: bool | None = None) -> Any:
    """The same DataLoader (dataset, sampler, collate_fn, pinning) with another number of workers.

    ``persistent`` None: from num_workers=0 the fix tried is the one the doctor names, workers that persist
    across epochs; otherwise the loader's own setting. True/False: that setting (with workers).
    """
    from torch.utils.data import DataLoader

    keep = bool(loader.persistent_workers) or loader.num_workers == 0
    kwargs: dict[str, Any] = {
        "num_workers": num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout if num_workers > 0 else 0,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context if num_workers > 0 else None,
        "generator": loader.generator,
        "persistent_workers": num_workers > 0 and (keep if persistent is None else persistent),
        "pin_memory_device": loader.pin_memory_device,
    }
    if num_workers > 0:
        kwargs["prefetch_factor"] = loader.prefetch_factor or 2
    if loader.batch_sampler is not None:
        kwargs["batch_sampler"] = loader.batch_sampler
    else:
        kwargs.update(batch_size=None, sampler=loader.sampler)
    return DataLoader(loader.dataset, **kwargs)


def more_workers(workers: int, usable: int) -> int | None:
    """The worker count to try next, or None when no more processes could load at once."""
    if workers == 0:
        return min(2, usable) if usable >= 1 else None
    if workers < usable:
        return min(2 * workers, usable)
    return None


def fewer_workers(workers: int, usable: int) -> int | None:
    """Fewer workers when they fill the cores (with the training thread): one core left to the step; else None."""
    if workers >= usable and workers > 1:
        return max(1, usable - 1)
    return None


def with_workers(spec: RunSpec, k: int, persistent: bool | None = None) -> RunSpec:
    """The run with ``num_workers=k`` (and ``persistent_workers`` when given): a reference workload's knobs, or
    the user's DataLoader cloned before it binds."""
    from perfsuite.jobs.contract import Job
    from perfsuite.jobs.registry import is_job_target

    if not is_job_target(spec.workload):
        flat: dict[str, Any] = {"num_workers": k}
        if k == 0:
            flat.update(persistent_workers=False, prefetch_factor=None)
        elif persistent is not None:
            flat.update(persistent_workers=persistent)
        elif spec.knobs.loader.num_workers == 0:
            flat.update(persistent_workers=True)
        return dataclasses.replace(spec, knobs=spec.knobs.replace(**flat))
    if isinstance(spec.workload, Job):  # one Job object serves every run: change a copy, never the user's
        job = spec.workload
        if job.loader is not None:
            loader = clone_loader(job.loader, k, persistent)
            return dataclasses.replace(spec, workload=dataclasses.replace(job, loader=loader))
        kwargs = {**job.loader_kwargs, "num_workers": k}
        if persistent is not None:
            kwargs["persistent_workers"] = persistent and k > 0
        return dataclasses.replace(spec, workload=dataclasses.replace(job, loader_kwargs=kwargs))
    previous = spec.mutate

    def mutate(job: Any) -> None:
        if previous is not None:
            previous(job)
        if job.loader is not None:
            job.loader = clone_loader(job.loader, k, persistent)
        else:
            job.loader_kwargs = {**job.loader_kwargs, "num_workers": k}
            if persistent is not None:
                job.loader_kwargs["persistent_workers"] = persistent and k > 0

    return dataclasses.replace(spec, mutate=mutate)


@dataclass
class Arm:
    """One counterfactual: the fix a finding names, run interleaved with the job as it is."""

    key: str  # "workers", "persistent" or "threads"
    label: str  # "num_workers 2 -> 1"
    fix: str  # "DataLoader(num_workers=1)"
    spec: RunSpec
    threads: int | None = None  # torch.set_num_threads for this arm's runs (a user's job sets its own otherwise)


def choose_arms(spec: RunSpec, result: Result, usable: int) -> tuple[list[Arm], dict[str, str]]:
    """The fixes the first run's evidence points at that a run can try, and why each other one cannot be tried.

    Worker start-up at each epoch (workers > 0, not persistent, an epoch started in the window) is tried as
    ``persistent_workers=True``; the worker count as more workers below the cores, fewer when they fill them
    (the step's thread shares the cores); the training process's intra-op threads as fewer when threads and
    workers together exceed the cores.
    """
    import torch

    arms: list[Arm] = []
    why: dict[str, str] = {}
    workers = result.knobs.get("num_workers")
    if not isinstance(workers, int) or not _rebuildable(result):
        why["workers"] = why["persistent"] = "the loader is not a DataLoader whose workers perfsuite can change"
    else:
        persistent = bool(result.knobs.get("persistent_workers"))
        epochs = result.metric("loader_process_cpu_ms_per_sample").detail.get("epochs_started") or len(
            result.samples.get("epoch_fetch_ms", [])
        )
        if workers > 0 and not persistent and epochs:
            arms.append(
                Arm(
                    "persistent",
                    "persistent_workers False -> True",
                    "DataLoader(persistent_workers=True)",
                    with_workers(spec, workers, persistent=True),
                )
            )
        elif workers > 0 and not persistent:
            why["persistent"] = "no epoch started in the measured window, so the workers were not forked again in it"
        k = more_workers(workers, usable)
        fewer = fewer_workers(workers, usable)
        if k is not None:
            arms.append(
                Arm("workers", f"num_workers {workers} -> {k}", f"DataLoader(num_workers={k})", with_workers(spec, k))
            )
        elif fewer is not None:
            arms.append(
                Arm(
                    "workers",
                    f"num_workers {workers} -> {fewer}",
                    f"DataLoader(num_workers={fewer})",
                    with_workers(spec, fewer),
                )
            )
        else:
            why["workers"] = f"num_workers={workers} on {usable} usable core(s): no other count to try"
    from perfsuite.jobs.registry import is_job_target

    threads = torch.get_num_threads()  # a user's job runs with the process's; perfsuite fits a reference's itself
    nw = workers if isinstance(workers, int) else 0
    fit = max(1, usable - nw)
    if not is_job_target(spec.workload):
        why["threads"] = "perfsuite already fits a reference workload's intra-op threads to the cores left to it"
    elif threads + nw > usable and threads > fit:
        if len(arms) < MAX_ARMS:
            arms.append(
                Arm("threads", f"torch threads {threads} -> {fit}", f"torch.set_num_threads({fit})", spec, threads=fit)
            )
        else:
            why["threads"] = f"only {MAX_ARMS} counterfactuals run per diagnosis (each costs a run per round)"
    return arms[:MAX_ARMS], why


MAX_ARMS = 2


# --------------------------------------------------------------------------- the machine's load


def _pressure_total_us(path: str = "/proc/pressure/cpu") -> int | None:
    """The kernel's cumulative "some" CPU pressure (microseconds some task waited for a core), or None."""
    try:
        for line in open(path, encoding="ascii"):  # noqa: SIM115 - one small /proc read
            if line.startswith("some"):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def machine_reading() -> dict[str, Any]:
    """A point reading of what the machine's other work costs: to difference around a run (:func:`load_over`)."""
    import os
    import time

    import psutil

    times = psutil.cpu_times()
    return {
        "t": time.monotonic(),
        "pressure_us": _pressure_total_us(),
        "steal_s": float(getattr(times, "steal", 0.0) or 0.0),
        "cpu_s": float(sum(times)),
        "load1": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def load_over(before: Mapping[str, Any], after: Mapping[str, Any], usable: int) -> dict[str, Any]:
    """Over one run: the share of the time some task waited for a core (CPU pressure), the steal share, and the
    run queue (1-minute load average) per usable core at its end."""
    out: dict[str, Any] = {"source": "doctor's own reading (/proc/pressure/cpu, psutil, os.getloadavg)"}
    dt = float(after["t"]) - float(before["t"])
    if dt > 0 and before.get("pressure_us") is not None and after.get("pressure_us") is not None:
        out["cpu_pressure"] = min(1.0, max(0.0, (after["pressure_us"] - before["pressure_us"]) / 1e6 / dt))
    cpu = float(after["cpu_s"]) - float(before["cpu_s"])
    if cpu > 0:
        out["steal"] = max(0.0, (float(after["steal_s"]) - float(before["steal_s"])) / cpu)
    if after.get("load1") is not None:
        out["run_queue_per_core"] = float(after["load1"]) / max(1, usable)
    return out


def contention_figures(result: Result, own: Mapping[str, Any] | None) -> dict[str, Any]:
    """The contention a run saw: the Result's own figures where the runner records them (its environment's
    ``contention``), else the doctor's reading around the run."""
    env = getattr(result, "environment", None)
    recorded = env.get("contention") if isinstance(env, Mapping) else None
    if isinstance(recorded, Mapping) and recorded:
        return {**dict(recorded), "source": "the Result's environment"}
    return dict(own or {})


# --------------------------------------------------------------------------- one diagnosis


@dataclass
class Diagnosis:
    """What the doctor found for one target: plain data, rendered by perfsuite.report.doctor."""

    target: str
    rounds: int
    device: str
    results: list[Result] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    wait: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, Any] = field(default_factory=dict)
    cached: dict[str, Any] = field(default_factory=dict)
    efficiency: dict[str, Any] = field(default_factory=dict)
    periodic: dict[str, Any] = field(default_factory=dict)
    workers: dict[str, Any] = field(default_factory=dict)
    counterfactuals: dict[str, dict[str, Any]] = field(default_factory=dict)
    contention: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    counterfactuals_reason: str = ""  # why none ran (a script's: perfsuite.tools.doctor_script)

    @property
    def bottleneck(self) -> str:
        return self.findings[0]["title"] if self.findings else "nothing found"

    def to_dict(self) -> dict[str, Any]:
        last = self.results[-1] if self.results else None
        return {
            "target": self.target,
            "rounds": self.rounds,
            "device": self.device,
            "workload": last.workload if last else None,
            "knobs": dict(last.knobs) if last else {},
            "fingerprint": last.fingerprint.key() if last else None,
            "bottleneck": self.bottleneck,
            "findings": self.findings,
            "ledger": self.ledger,
            "wait": self.wait,
            "stages": self.stages,
            "cached_batch": self.cached,
            "input_efficiency": self.efficiency,
            "periodic": self.periodic,
            "workers": self.workers,
            "counterfactuals": self.counterfactuals,
            "contention": self.contention,
            "observed": self.observed,
            "timeline": _timeline(last, self.observed) if last else {},
            "notes": self.notes,
            "contention_runs": contention_line({f"run {i + 1}": r for i, r in enumerate(self.results)}),  # or None
            "counterfactuals_reason": self.counterfactuals_reason,
        }


def _timeline(result: Result, observed: dict[str, Any]) -> dict[str, Any]:
    """What the PNG draws: the window's steps (fetch, then the rest), the loader's busy cores, the observed steps."""
    return {
        "fetch_ms": list(result.samples.get("fetch_ms", [])),
        "host_step_ms": list(result.samples.get("host_step_ms", [])),
        "loader_cpu_t": list(result.timeline.get("loader_cpu_t", [])),
        "loader_cpu_cores": list(result.timeline.get("loader_cpu_cores", [])),
        "gpu_t": list(result.timeline.get("t_s", [])),
        "gpu_util": list(result.timeline.get("gpu_util", [])),
        "observed_steps": observed.get("steps", []),
    }


def _run_arm(arm: Arm | None, spec: RunSpec, probes: list[Any]) -> Result:
    import torch

    from perfsuite.harness.runner import run

    if arm is None or arm.threads is None:
        return run(spec if arm is None else arm.spec, probes)
    before = torch.get_num_threads()
    torch.set_num_threads(arm.threads)
    try:
        return run(arm.spec, probes)
    finally:
        torch.set_num_threads(before)


def diagnose(
    spec: RunSpec,
    target: str,
    rounds: int = DEFAULT_ROUNDS,
    counterfactuals: bool = True,
    progress: Callable[[str], None] = lambda s: None,
) -> Diagnosis:
    """Run ``spec`` ``rounds`` times (and its counterfactuals, interleaved) and say what limits it."""
    from perfsuite.core.cores import usable_cores
    from perfsuite.harness.runner import default_probes
    from perfsuite.probes.stepledger import StepLedgerProbe

    if rounds < 1:
        raise PerfsuiteError(f"rounds={rounds} must be 1 or more")
    if spec.observe_steps < 1:
        spec = dataclasses.replace(spec, observe_steps=1)
    if spec.sol_steps < 3:
        spec = dataclasses.replace(spec, sol_steps=5)
    usable = usable_cores().usable
    base_runs: list[Result] = []
    ledgers: list[StepLedgerProbe] = []
    loads: list[dict[str, Any]] = []
    arms: list[Arm] = []
    why: dict[str, str] = {} if counterfactuals else {"all": "not run (--no-counterfactuals)"}
    cf_runs: dict[str, list[Result]] = {}
    for r in range(rounds):
        order: list[Arm | None] = [None, *arms]
        order = order[r % len(order) :] + order[: r % len(order)]  # each arm takes each place in turn
        for arm in order:
            if arm is not None:
                progress(f"round {r + 1}/{rounds}: {arm.label}")
                cf_runs.setdefault(arm.key, []).append(_run_arm(arm, spec, default_probes()))
                continue
            progress(f"round {r + 1}/{rounds}: as it is")
            probe = StepLedgerProbe()
            before = machine_reading()
            result = _run_arm(None, spec, [*default_probes(), probe])
            loads.append(load_over(before, machine_reading(), usable))
            base_runs.append(result)
            ledgers.append(probe)
            if r == 0 and counterfactuals:  # the first run says what to try: it runs next, in this round
                arms, why = choose_arms(spec, result, usable)
                for a in arms:
                    progress(f"round 1/{rounds}: {a.label}")
                    cf_runs.setdefault(a.key, []).append(_run_arm(a, spec, default_probes()))
    return assess(target, base_runs, ledgers, cf_runs, arms, why, usable, loads)


def _rebuildable(result: Result) -> bool:
    """Whether the run's loader is a DataLoader perfsuite can clone with other workers (its knobs were read)."""
    return "num_workers" in result.knobs and not str(result.knob_sources.get("num_workers", "")).startswith("not known")


# --------------------------------------------------------------------------- assessment


def assess(
    target: str,
    base_runs: Sequence[Result],
    ledgers: Sequence[Any],
    cf_runs: Mapping[str, Sequence[Result]],
    arms: Sequence[Arm],
    why: Mapping[str, str],
    usable: int,
    loads: Sequence[Mapping[str, Any]] = (),
) -> Diagnosis:
    """Turn the runs into the ledger, the band, the stages, the counterfactuals and the findings."""
    last = base_runs[-1]
    d = Diagnosis(target, len(base_runs), last.fingerprint.device, list(base_runs))
    d.notes = sorted({n for r in base_runs for n in r.notes if not n.startswith("oversubscribed:")})
    fetch = [r.samples.get("fetch_ms", []) for r in base_runs]
    host = [r.samples.get("host_step_ms", []) for r in base_runs]
    sol = [r.samples.get("sol_step_ms", []) for r in base_runs]
    d.periodic = periodic_work(fetch, host, [Epochs.of(r.samples) for r in base_runs])
    d.wait = wait_band(fetch, host)
    d.observed = _observed(ledgers, last)
    d.ledger = _ledger(fetch, host, sol, d.observed, last.fingerprint.device, d.periodic)
    d.cached = _cached(host, sol, d.ledger, d.periodic, fetch)
    d.stages = _stages(last, d.wait.get("share"), d.cached)
    d.efficiency = _efficiency(host, sol, d.ledger, d.periodic, fetch)
    own = list(loads) + [{}] * (len(base_runs) - len(loads))
    d.contention = _contention([contention_figures(r, o) for r, o in zip(base_runs, own)], last, usable)
    if d.efficiency.get("available") and d.contention.get("busy"):
        d.efficiency["caveat"] = (
            "measured on a busy machine (" + "; ".join(d.contention["reasons"]) + "): its interval covers the runs' "
            "differences, not a quieter machine's figure"
        )
    d.counterfactuals = _counterfactuals(base_runs, cf_runs, arms, why)
    d.workers = _workers(base_runs, d.counterfactuals, usable, why)
    d.findings = _findings(d, last)
    return d


def periodic_work(
    fetch: Sequence[Sequence[float]], host: Sequence[Sequence[float]], epochs: Sequence[Epochs] | None = None
) -> dict[str, Any]:
    """Steps that carry work done every N steps (an evaluation, a checkpoint): found from the window's own step
    work (wall less the wait for the batch), per run; their extra time beyond the median step's work.

    Long steps with the epochs (``epochs``, one per run: :meth:`Epochs.own`) are left to the loader (workers forked
    again at each epoch, shut down at its end), and so are long steps at irregular gaps (the machine's other work).
    """
    from perfsuite.probes.periods import periodic_steps

    flags: list[list[bool]] = []
    every: int | None = None
    extra_ms = total_ms = 0.0
    long_ms: list[float] = []
    for k, (f, h) in enumerate(zip(fetch, host)):
        work = [max(0.0, b - a) for a, b in zip(f, h)]
        marks = [False] * len(work)
        r, hits = periodic_steps(work)
        at_epochs = epochs is not None and k < len(epochs) and epochs[k].own(r.every, hits, len(work))
        if r.periodic and not at_epochs:
            every = every or r.every
            median = sorted(work)[len(work) // 2]
            for i in hits:
                marks[i] = True
                extra_ms += work[i] - median
                long_ms.append(work[i])
        flags.append(marks)
        total_ms += sum(h)
    if every is None:
        return {"found": False, "flags": flags}
    steps = sum(len(h) for h in host)
    return {
        "found": True,
        "every": every,
        "steps": sum(sum(m) for m in flags),
        "extra_ms_per_step": extra_ms / steps if steps else 0.0,
        "share": extra_ms / total_ms if total_ms > 0 else 0.0,
        "long_step_ms": sorted(long_ms)[len(long_ms) // 2] if long_ms else None,
        "flags": flags,
    }


def _observed(ledgers: Sequence[Any], result: Result | None = None) -> dict[str, Any]:
    summaries = [p.summary() for p in ledgers]
    summaries = [s for s in summaries if s.get("observed_steps")]
    out: dict[str, Any] = {"observed_steps": 0}
    if summaries:
        n = len(summaries)
        sites: dict[str, float] = {}
        for s in summaries:
            for site, ms in s["sync_sites"].items():
                sites[site] = sites.get(site, 0.0) + ms / n
        out = {
            "observed_steps": sum(s["observed_steps"] for s in summaries),
            "wall_ms": sum(s.get("wall_ms", 0.0) for s in summaries) / n,
            "sync_ms": sum(s["sync_ms"] for s in summaries) / n,
            "copy_ms": sum(s["copy_ms"] for s in summaries) / n,
            "syncs_per_step": sum(s["syncs_per_step"] for s in summaries) / n,
            "sync_sites": sites,
            "steps": summaries[-1]["steps"],
        }
    if result is not None:  # the sync probe's count, with the sites that fire every N steps apart
        m = result.metric("syncs_per_step")
        if m.available:
            periodic = [s for s in m.detail.get("sites", []) if s.get("every") not in (None, 1)]
            out["periodic_syncs"] = [
                {"op": s["op"], "site": s["site"], "per_step": s["per_step"], "seen": s.get("seen", "")}
                for s in periodic
            ]
    return out


def _mean(groups: Sequence[Sequence[float]]) -> float:
    values = [x for g in groups for x in g]
    return sum(values) / len(values) if values else 0.0


SOL_SLACK = 0.05  # the cached-batch step may read this much above the window's own step work (a median of 5)


def _ledger(
    fetch: Sequence[Sequence[float]],
    host: Sequence[Sequence[float]],
    sol: Sequence[Sequence[float]],
    observed: dict[str, Any],
    device: str,
    periodic: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Per step, in ms, parts that add up to the window's mean step, each between 0 and 100% of it.

    The wait for the batch and the periodic work are the window's own steps; the step's own work (the rest
    of each step) is split by ratios, never by subtracting figures taken under other conditions: the syncs'
    and copies' share of the observed steps, and compute as the cached-batch step when it fits in the
    window's own work. When it does not (those steps ran on a busier machine), compute is unavailable and
    the step's own work is one part.
    """
    import statistics

    step, wait = _mean(host), _mean(fetch)
    extra = float((periodic or {}).get("extra_ms_per_step", 0.0)) if (periodic or {}).get("found") else 0.0
    own = max(0.0, step - wait - extra)
    obs_wall = float(observed.get("wall_ms") or 0.0)
    sync_frac = min(1.0, float(observed.get("sync_ms", 0.0)) / obs_wall) if obs_wall > 0 else 0.0
    copy_frac = min(1.0 - sync_frac, float(observed.get("copy_ms", 0.0)) / obs_wall) if obs_wall > 0 else 0.0
    syncs, copy = sync_frac * own, copy_frac * own
    work = own - syncs - copy  # compute and the rest
    cpu = not device.startswith("cuda")
    sync_name = "reads to Python" if cpu else "host syncs"
    parts: dict[str, float | None] = {"wait for the batch": wait, "host->device copy": copy, sync_name: syncs}
    notes: list[str] = []
    sol_values = [x for g in sol for x in g]
    compute: float | None = None
    if sol_values:
        cached = statistics.median(sol_values) * (1.0 - sync_frac - copy_frac)
        if cached <= work * (1.0 + SOL_SLACK):
            compute = min(cached, work)
            parts["compute"], parts["the rest"] = compute, work - compute
        else:
            parts["compute and the rest"] = work
            notes.append(
                f"compute unavailable: fed a cached batch the step took {cached:.3g} ms, more than the window's "
                f"steps spent on their own work ({work:.3g} ms): the two ran under different load, so one is not "
                "a part of the other"
            )
    else:
        parts["compute and the rest"] = work
        notes.append("no speed-of-light steps: compute is not told apart from the rest")
    if extra > 0:
        parts[f"periodic work (every {periodic['every']} steps)"] = extra  # type: ignore[index]
    if cpu:
        notes.append(
            "a CPU run has no device: nothing is copied to one, and a read to Python (.item(), .cpu()) waits for "
            "no queued work; its time is the op's own, which on a GPU would also wait for the queue to drain"
        )
    if compute is not None and work > 0 and parts["the rest"] > 0.2 * step:  # type: ignore[operator]
        notes.append(
            "the rest is what the window's steps spent beyond the same step fed a cached batch with the loader "
            "idle: waiting for a core (the loader's workers, other processes), the allocator, Python"
        )
    return {
        "step_ms": step,
        "parts": parts,
        "shares": {k: (v / step if step > 0 and v is not None else 0.0) for k, v in parts.items()},
        "sync_sites": observed.get("sync_sites", {}),
        "syncs_per_step": observed.get("syncs_per_step", 0.0),
        "periodic_syncs": observed.get("periodic_syncs", []),
        "compute_available": compute is not None,
        "notes": notes,
    }


def _stages(result: Result, wait_share: float | None = None, cached: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The loader's cost per sample by stage, the processes' overhead beyond them, and the costliest; and one
    sentence that reconciles the headroom with the data wait."""
    m = result.metric("loader_cpu_ms_per_sample")
    process = result.metric("loader_process_cpu_ms_per_sample")
    main = result.metric("main_load_ms_per_step")
    capacity = result.metric("loader_capacity_samples_per_s")
    headroom = result.metric("loader_headroom")
    stages_capacity = capacity.value if capacity.available else None
    after = capacity.detail.get("after_overhead")
    if after is not None and stages_capacity is not None and after > stages_capacity:
        after = stages_capacity  # an older Result: the overhead is never negative (perfsuite.probes.loader)
    out: dict[str, Any] = {
        "available": m.available,
        "reason": m.reason,
        "num_workers": result.knobs.get("num_workers"),
        "persistent_workers": result.knobs.get("persistent_workers"),
        "main_load_ms_per_step": main.value,
        "capacity_samples_per_s": stages_capacity,
        "capacity_after_overhead": after,
        "overhead_note": capacity.detail.get("overhead_note"),
        "headroom": headroom.value,
        "headroom_reason": headroom.reason,
        "demand": headroom.detail.get("demand"),
        "cores_busy": process.detail.get("cores_busy") if process.available else None,
        "usable_cores": capacity.detail.get("usable_cores"),
    }
    demand = headroom.detail.get("demand")
    if cached and cached.get("available") and (after or stages_capacity) and not str(demand).startswith("declared"):
        # One speed of light per report: the cached-batch step pooled over the runs, not the last run's own.
        rate = result.batch_size * 1e3 / float(cached["cached_ms"])
        out["headroom"] = float(after or stages_capacity) / rate  # type: ignore[arg-type]
        out["demand"] = f"the speed of light: fed a cached batch the step takes {rate:.4g} samples/s"
    if not m.available:
        return out
    by = dict(m.detail.get("by", {}))
    code = dict(m.detail.get("code", {}))
    ranked = dict(by)
    if process.available:
        beyond = float(process.value) - float(m.value)  # type: ignore[arg-type]
        out["process_ms_per_sample"] = process.value
        if beyond > 0 and (result.knobs.get("num_workers") or 0) > 0:
            epochs = process.detail.get("epochs_started", 0)
            persistent = result.knobs.get("persistent_workers")
            what = (
                "forking workers at each epoch and passing batches between processes"
                if (epochs and not persistent)
                else "passing batches between processes, the worker loop"
            )
            ranked["worker processes"] = beyond
            code["worker processes"] = what
    total = sum(ranked.values())
    costliest = max(ranked, key=lambda k: ranked[k]) if ranked else None
    out.update(
        by=ranked,
        code=code,
        shares={k: v / total if total > 0 else 0.0 for k, v in ranked.items()},
        costliest=costliest,
        replayed_ms_per_sample=m.value,
    )
    out["reconcile"] = reconcile(out, result, wait_share)
    return out


LOADER_BUSY = 0.25  # cores the loader keeps busy on average before sharing them with the step is a reason


def reconcile(stages: Mapping[str, Any], result: Result, wait_share: float | None) -> str | None:
    """One sentence saying why a loader with headroom above 1 still leaves the step waiting (or None when it
    does not): the wait at epoch starts, which a steady capacity leaves out, and the cores the loader's
    processes share with the step, which the capacity counts as theirs."""
    headroom = stages.get("headroom")
    if headroom is None or headroom < 1 or not wait_share or wait_share < 0.05:
        return None
    fetch = list(result.samples.get("fetch_ms", []))
    epoch_ms = sum(result.samples.get("epoch_fetch_ms", []))
    why = []
    if fetch and epoch_ms > 0 and sum(fetch) > 0:
        n = len(result.samples.get("epoch_fetch_ms", []))
        why.append(
            f"{epoch_ms / sum(fetch):.0%} of the wait falls on the {n} epoch start(s) in the window (the first "
            "batches of an epoch, with workers forked again when they do not persist), which a steady capacity "
            "leaves out"
        )
    workers = stages.get("num_workers") or 0
    usable = stages.get("usable_cores")
    busy = stages.get("cores_busy")
    if usable and workers and workers + 1 > usable and (busy is None or busy >= LOADER_BUSY):
        why.append(
            f"the capacity counts a core per process, but {workers} worker(s) and the training thread share "
            f"{usable} core(s)" + (f" (the loader kept {busy:.2f} busy on average)" if busy is not None else "")
        )
    if not why:
        why.append("the loader delivers in bursts: its prefetch queue ran dry between them")
    return f"headroom x{headroom:.2f} yet data wait {wait_share:.0%}: " + "; and ".join(why)


def _rounds(
    host: Sequence[Sequence[float]], fetch: Sequence[Sequence[float]], periodic: Mapping[str, Any]
) -> list[list[float]]:
    """Each run's steady steps: the window's steps less the periodic work's extra time on the steps carrying it."""
    flags = periodic.get("flags") or [[False] * len(h) for h in host]
    out = []
    for h, f, marks in zip(host, fetch, flags):
        work = [max(0.0, b - a) for a, b in zip(f, h)]
        median = sorted(work)[len(work) // 2] if work else 0.0
        out.append([b - (w - median if m else 0.0) for b, w, m in zip(h, work, marks)])
    return out


def _two_level(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], stat: Callable[[Any, Any], float]
) -> tuple[float, float, float]:
    """(estimate, low, high) of stat(a's values, b's values) (numpy arrays): runs resampled, then the steps within
    each run, so the interval covers the runs' differences as well as the steps'."""
    import numpy as np

    rng = np.random.default_rng(5)
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(a, b) if len(x) and len(y)]
    estimate = stat(np.concatenate([x for x, _ in pairs]), np.concatenate([y for _, y in pairs]))
    draws = np.empty(BOOTSTRAP)
    for k in range(BOOTSTRAP):
        chosen = [pairs[r] for r in rng.integers(0, len(pairs), len(pairs))]
        xs = np.concatenate([x[rng.integers(0, len(x), len(x))] for x, _ in chosen])
        ys = np.concatenate([y[rng.integers(0, len(y), len(y))] for _, y in chosen])
        draws[k] = stat(xs, ys)
    lo, hi = np.percentile(draws, [(1 - CONFIDENCE) / 2 * 100, (1 + CONFIDENCE) / 2 * 100])
    return float(estimate), float(lo), float(hi)


def _cached(
    host: Sequence[Sequence[float]],
    sol: Sequence[Sequence[float]],
    ledger: Mapping[str, Any] | None = None,
    periodic: Mapping[str, Any] | None = None,
    fetch: Sequence[Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Fed a cached batch, the step takes X ms [CI]; the input costs the steady step less that, Y ms/step [CI]
    (periodic work left out: an evaluation is not the input's)."""
    import numpy as np

    if not any(sol) or not any(host):
        return {"available": False, "reason": "no speed-of-light steps were run"}
    if ledger is not None and not ledger.get("compute_available", True):
        why = next((n for n in ledger.get("notes", []) if n.startswith("compute unavailable")), "")
        return {"available": False, "reason": why.removeprefix("compute unavailable: ") or "compute unavailable"}
    steady = _rounds(host, fetch or [[0.0] * len(h) for h in host], periodic or {})
    x, x_lo, x_hi = _two_level(sol, sol, lambda s, _: float(np.median(s)))
    cost, lo, hi = _two_level(steady, sol, lambda h, s: float(h.mean() - np.median(s)))
    return {
        "available": True,
        "step_ms": _mean(steady),
        "cached_ms": x,
        "cached_low": x_lo,
        "cached_high": x_hi,
        "saves_ms": max(0.0, cost),
        "saves_low": max(0.0, lo),
        "saves_high": max(0.0, hi),
        "confidence": CONFIDENCE,
    }


def _efficiency(
    host: Sequence[Sequence[float]],
    sol: Sequence[Sequence[float]],
    ledger: Mapping[str, Any],
    periodic: Mapping[str, Any],
    fetch: Sequence[Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Input efficiency with its interval: the cached-batch step's median over the steady mean step (periodic work
    left out), never above 1; unavailable, with the reason, when the cached-batch steps ran on a busier machine."""
    import numpy as np

    if not any(sol):
        return {"available": False, "reason": "no speed-of-light steps were run"}
    if not ledger.get("compute_available", True):
        why = next((n for n in ledger.get("notes", []) if n.startswith("compute unavailable")), "")
        return {"available": False, "reason": why.removeprefix("compute unavailable: ")}
    steady = _rounds(host, fetch or [[0.0] * len(h) for h in host], periodic)

    def eff(h: Any, s: Any) -> float:
        mean = float(h.mean())
        return min(1.0, float(np.median(s)) / mean) if mean > 0 else 0.0

    value, lo, hi = _two_level(steady, sol, eff)
    return {
        "available": True,
        "value": value,
        "low": lo,
        "high": hi,
        "confidence": CONFIDENCE,
        "runs": sum(1 for h in host if h),
        "periodic_left_out": bool(periodic.get("found")),
    }


BUSY_PRESSURE = 0.20  # some task waited for a core this share of the time: the step's thread waits too
BUSY_RUN_QUEUE = 1.0  # runnable tasks per usable core


def _contention(per_run: Sequence[Mapping[str, Any]], result: Result, usable: int) -> dict[str, Any]:
    """The machine's load over the runs (mean of each figure), the loader's own use of the cores, and whether it
    is high enough to slow the step."""
    out: dict[str, Any] = {"usable_cores": usable, "runs": len(per_run)}
    for key in ("cpu_pressure", "steal", "run_queue_per_core"):
        values = [float(r[key]) for r in per_run if isinstance(r.get(key), (int, float))]
        if values:
            out[key] = sum(values) / len(values)
    sources = {str(r.get("source")) for r in per_run if r.get("source")}
    out["source"] = ", ".join(sorted(sources)) or "none read"
    process = result.metric("loader_process_cpu_ms_per_sample")
    if process.available:
        out["loader_cores_busy"] = process.detail.get("cores_busy")
    loader_busy = float(out.get("loader_cores_busy") or 0.0)
    reasons = []
    if out.get("cpu_pressure", 0.0) >= BUSY_PRESSURE:
        reasons.append(f"some task waited for a core {out['cpu_pressure']:.0%} of the time (CPU pressure)")
    if out.get("run_queue_per_core", 0.0) > BUSY_RUN_QUEUE:
        reasons.append(f"{out['run_queue_per_core']:.2g} runnable tasks per usable core (1-minute load average)")
    if loader_busy + 1.0 > usable:
        reasons.append(
            f"the loader kept {loader_busy:.2f} of the {usable} usable core(s) busy beside the training thread"
        )
    out["busy"] = bool(reasons)
    out["reasons"] = reasons
    return out


def _counterfactuals(
    base: Sequence[Result], cf: Mapping[str, Sequence[Result]], arms: Sequence[Arm], why: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Each tried fix's samples/s against the job as it is, paired by round; each fix not tried with why."""
    out: dict[str, dict[str, Any]] = {}
    for arm in arms:
        runs = list(cf.get(arm.key, []))
        b = [r.value("samples_per_s") or 0.0 for r in base][: len(runs)]
        h = [r.value("samples_per_s") or 0.0 for r in runs]
        out[arm.key] = {"label": arm.label, "fix": arm.fix, **ratio_interval(b, h), "base": b, "tried": h}
    for key, reason in why.items():
        out.setdefault(key, {"reason": reason})
    return out


def _workers(
    base: Sequence[Result], cfs: Mapping[str, Mapping[str, Any]], usable: int, why: Mapping[str, str]
) -> dict[str, Any]:
    workers = base[-1].knobs.get("num_workers")
    out: dict[str, Any] = {"num_workers": workers, "usable_cores": usable, "tried": None}
    arm = cfs.get("workers", {})
    if arm.get("label"):
        out["tried"] = int(str(arm["label"]).rsplit("-> ", 1)[1])
        out.update({k: arm[k] for k in ("pairs", "ratio", "low", "high") if k in arm})
        out["base_samples_per_s"], out["samples_per_s"] = arm["base"], arm["tried"]
    else:
        out["reason"] = arm.get("reason") or why.get("all") or why.get("workers") or "not tried"
    return out


# --------------------------------------------------------------------------- findings


def _ci(lo: float | None, hi: float | None, fmt: str = ".3g", unit: str = "") -> str:
    if lo is None or hi is None:
        return ""
    return f" [{CONFIDENCE:.0%} CI {lo:{fmt}}{unit}..{hi:{fmt}}{unit}]"


def _finding(
    title: str,
    evidence: str,
    fix: str,
    kind: str,
    predicted: Mapping[str, Any] | None = None,
    measured: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A finding: what, the evidence, the fix, and the fix's gain in samples/s predicted from this run's ledger
    beside the one measured in interleaved runs (or why it was not)."""
    pred = dict(predicted or {"reason": "no model"})
    meas = dict(measured or {"reason": "not tried"})
    return {
        "title": title,
        "evidence": evidence,
        "fix": fix,
        "kind": kind,
        "predicted": pred,
        "measured": meas,
        "effect": effect_text(pred, meas),
    }


def effect_text(predicted: Mapping[str, Any], measured: Mapping[str, Any]) -> str:
    """``predicted x1.30 samples/s (basis); measured x1.25 [95% CI x1.10..x1.42], 3 interleaved pairs (label)``."""
    if predicted.get("ratio") is not None:
        p = f"predicted x{predicted['ratio']:.2f} samples/s ({predicted.get('basis', '')})"
    else:
        p = f"predicted: {predicted.get('reason', 'no model')}"
    if measured.get("ratio") is not None:
        m = f"measured x{measured['ratio']:.2f}"
        if measured.get("low") is not None:
            m += f" [{CONFIDENCE:.0%} CI x{measured['low']:.2f}..x{measured['high']:.2f}]"
        m += f", {measured.get('pairs')} interleaved pair(s) ({measured.get('label')})"
    else:
        m = f"measured: {measured.get('reason', 'not tried')}"
    return f"{p}; {m}"


def _ratio(step: float, new: float) -> float | None:
    return step / new if step > 0 and new > 0 else None


def _steady(d: Diagnosis) -> float:
    """The steady mean step (ms): the window's mean step less the periodic work."""
    return float(d.cached.get("step_ms") or 0.0) or (
        float(d.ledger.get("step_ms", 0.0)) - float(d.periodic.get("extra_ms_per_step", 0.0))
    )


def _loader_share_of_cores(d: Diagnosis) -> float | None:
    """The loader's share of what competed with the training thread for a core: its busy cores among the
    runnable tasks (None without the machine's run queue)."""
    busy = float(d.contention.get("loader_cores_busy") or 0.0)
    queue = d.contention.get("run_queue_per_core")
    if queue is None:
        return None
    runnable = float(queue) * int(d.contention.get("usable_cores") or 1)
    return min(1.0, busy / max(busy, runnable - 1.0)) if busy > 0 else 0.0


def _input_cost(d: Diagnosis) -> tuple[float, str]:
    """What the loader costs the step, ms per step, and how it was read: the wait for the batch, plus the
    loader's share of the step's wait for a core ("the rest") where the machine's run queue says it."""
    parts = d.ledger.get("parts", {})
    wait = float(parts.get("wait for the batch") or 0.0)
    rest = parts.get("the rest")
    share = _loader_share_of_cores(d)
    if rest is None:
        return wait, f"the wait for the batch, {wait:.3g} ms/step"
    if share is None:
        return wait + float(rest), f"the wait and the rest, {wait + float(rest):.3g} ms/step"
    cost = wait + share * float(rest)
    return cost, f"the wait and the loader's {share:.0%} of the rest, {cost:.3g} ms/step"


def predict_cut(d: Diagnosis, share: float, what: str) -> dict[str, Any]:
    """Cutting a share of the loader's CPU cuts that share of what the loader costs the step per step."""
    step = _steady(d)
    cost, how = _input_cost(d)
    ratio = _ratio(step, step - share * cost)
    if ratio is None:
        return {"reason": "no steady step to predict from"}
    return {"ratio": ratio, "basis": f"{what} is {share:.0%} of the loader's CPU; the loader costs {how}"}


def predict_workers(d: Diagnosis, k: int, result: Result) -> dict[str, Any]:
    """samples/s = min(the cached-batch step's, the loader's capacity after its overhead with k processes)."""
    from perfsuite.probes.loader import effective_processes

    usable = int(d.workers.get("usable_cores") or 1)
    now = result.knobs.get("num_workers")
    capacity = d.stages.get("capacity_after_overhead") or d.stages.get("capacity_samples_per_s")
    parts = d.ledger.get("parts", {})
    own = float(d.ledger.get("step_ms", 0.0)) - float(parts.get("wait for the batch") or 0.0)
    own -= float(d.periodic.get("extra_ms_per_step", 0.0)) if d.periodic.get("found") else 0.0
    # The speed of light: the cached-batch step, or where it is unavailable the window's steps less their wait.
    cached = d.cached.get("cached_ms") or (own if own > 0 else None)
    measured = [r.value("samples_per_s") or 0.0 for r in d.results]
    current = sum(measured) / len(measured) if measured else 0.0
    if not isinstance(now, int) or not capacity or not cached or current <= 0:
        return {"reason": "no loader capacity or speed of light to predict from"}
    scaled = float(capacity) * effective_processes(k, usable) / effective_processes(now, usable)
    ceiling = result.batch_size * 1e3 / float(cached)
    rest = d.ledger.get("parts", {}).get("the rest")
    if k < now and rest is not None:
        # Fewer workers give back, at most, the loader's share of the step's wait for a core ("the rest"): its
        # busy cores among everything that competed with the training thread.
        busy = float(d.contention.get("loader_cores_busy") or 0.0)
        runnable = float(d.contention.get("run_queue_per_core") or 0.0) * usable
        share = _loader_share_of_cores(d) or 0.0
        step = _steady(d)
        fed = _ratio(step, step - share * float(rest)) or 1.0
        return {
            "ratio": min(fed, scaled / current),
            "basis": f"the loader kept {busy:.2f} core(s) busy among {max(runnable, busy + 1):.2g} runnable tasks: "
            f"its {share:.0%} of the rest ({float(rest):.3g} ms/step) given back, within the capacity "
            f"{scaled:.4g} samples/s of {k} process(es)",
        }
    return {
        "ratio": min(scaled, ceiling) / current,
        "basis": f"min(loader capacity {float(capacity):.4g} samples/s scaled to {k} process(es), the speed of "
        f"light {ceiling:.4g}) over {current:.4g} measured",
    }


def _measured(d: Diagnosis, key: str) -> dict[str, Any]:
    cf = d.counterfactuals.get(key, {})
    if cf.get("pairs"):
        return {k: cf.get(k) for k in ("ratio", "low", "high", "pairs", "label")}
    return {"reason": f"not tried: {cf.get('reason', 'no counterfactual for it')}"}


STAGE_FIXES = {
    "collate_fn": "make {code} cheap: stack arrays (torch.utils.data.default_collate) instead of per-sample Python",
    "transform": "move the random part of {code} to the device, batched (perfsuite: aug='gpu'; Kornia), "
    "or make it cheaper",
    "__getitem__": "{code} reads and decodes: store images at the size you train on, or decode on the GPU "
    "(torchvision.io.decode_jpeg(device='cuda'), DALI)",
    "pin_memory": "pin fewer bytes: ship uint8 from the loader and convert on the device",
    "worker processes": "DataLoader(persistent_workers=True): the workers are forked again at every epoch now",
    "worker processes (persistent)": "a larger batch_size: fewer batches to pass between processes per sample",
}
STAGE_NOT_TRIED = {
    "collate_fn": "a change to {code}, the job's code: perfsuite cannot make it for you",
    "transform": "a change to {code}: moving it to the device needs a CUDA device and the job's code",
    "__getitem__": "a change to the stored data or to {code}: perfsuite cannot make it for you",
    "pin_memory": "a change to the batch's dtype in the job's code",
    "worker processes (persistent)": "the batch size changes what the model trains on: try it with perfsuite ab",
}
STAGE_SHARE = 0.15  # every loader stage costing this share of its CPU or more gets its own finding


def _stage_fix(stage: str, code: str, result: Result) -> str:
    if stage == "worker processes" and result.knobs.get("persistent_workers"):
        stage = "worker processes (persistent)"
    return STAGE_FIXES.get(stage, "make {code} cheaper").format(code=code)


def _stage_findings(d: Diagnosis, result: Result, band: str, first: str, share: str) -> list[dict[str, Any]]:
    """One finding per loader stage that costs a share of its CPU, each with its own fix, costliest first (the
    first one's evidence ``first``, the others' ``share``)."""
    stages = d.stages
    out: list[dict[str, Any]] = []
    for name, ms in sorted(stages.get("by", {}).items(), key=lambda kv: -kv[1]):
        part = stages["shares"].get(name, 0.0)
        if part < STAGE_SHARE and name != stages.get("costliest"):
            continue
        code = stages["code"].get(name, name)
        persistent = name == "worker processes" and not result.knobs.get("persistent_workers")
        key = (
            "worker processes"
            if persistent
            else ("worker processes (persistent)" if name == "worker processes" else name)
        )
        measured = (
            _measured(d, "persistent")
            if persistent
            else {"reason": "not tried: " + STAGE_NOT_TRIED.get(key, "a change to {code}").format(code=code)}
        )
        label = "the loader's costliest stage" if name == stages.get("costliest") else "a loader stage"
        out.append(
            _finding(
                f"{band}: {label} is {name}",
                f"{share if out else first}; {name} ({code}) costs {ms:.3g} ms of CPU per sample, {part:.0%} of the "
                "loader's",
                _stage_fix(name, code, result),
                f"stage:{name}",
                predict_cut(d, part, name),
                measured,
            )
        )
    return out


def _busy_finding(d: Diagnosis, result: Result) -> dict[str, Any] | None:
    """The noisy neighbour: the machine's load, or the loader's own use of the cores, slows the step."""
    c = d.contention
    if not c.get("busy"):
        return None
    rest = d.ledger.get("parts", {}).get("the rest")
    figures = list(c.get("reasons", []))
    for key, name in (("steal", "steal"),):
        if c.get(key) is not None:
            figures.append(f"{name} {c[key]:.1%}")
    if rest is not None:
        figures.append(
            f"the step's work beyond the same step fed a cached batch with the loader idle ('the rest') is "
            f"{rest:.3g} ms/step, {d.ledger['shares'].get('the rest', 0.0):.0%} of it"
        )
    nw = result.knobs.get("num_workers")
    fewer = d.counterfactuals.get("workers", {})
    threads = d.counterfactuals.get("threads", {})
    fixes = []
    if isinstance(nw, int) and nw > 0:
        fixes.append(
            fewer.get("fix")
            if str(fewer.get("label", "")).count("->") and "fix" in fewer
            else f"fewer workers (num_workers<{nw})"
        )
    fixes.append(threads.get("fix") or "fewer intra-op threads (torch.set_num_threads)")
    fixes.append("decode moved off the CPU (torchvision.io.decode_jpeg on the GPU, DALI)")
    if c.get("cpu_pressure", 0.0) >= BUSY_PRESSURE or c.get("run_queue_per_core", 0.0) > BUSY_RUN_QUEUE:
        fixes.append("on a shared CI runner, a dedicated one: wall-clock figures from this machine mix in its load")
    measured = (
        _measured(d, "workers")
        if fewer.get("pairs") and "-> " in str(fewer.get("label"))
        else (_measured(d, "threads") if threads.get("pairs") else _measured(d, "workers"))
    )
    if rest is not None and rest > 0:
        predicted = {
            "ratio": _ratio(_steady(d), _steady(d) - rest),
            "basis": "an upper bound: the step got its cores back and took what it takes fed a cached batch",
        }
    else:
        predicted = (
            {"ratio": 1.0, "basis": "the window's steps took no longer than the same step fed a cached batch"}
            if rest is not None
            else {"reason": "compute was not told apart from the rest, so the step's wait for a core is not known"}
        )
    return _finding(
        "busy machine (noisy neighbour): the step waits for a core",
        "; ".join(figures) + f" (read by {c.get('source')})",
        "; ".join(x for x in fixes if x),
        "busy",
        predicted,
        measured,
    )


def _findings(d: Diagnosis, result: Result) -> list[dict[str, Any]]:
    """The findings, the bottleneck first. A band the interval does not settle is said in the evidence, never as
    the headline: the headline is the point estimate's band and what it costs."""
    out: list[dict[str, Any]] = []
    wait, stages, workers = d.wait, d.stages, d.workers
    band = wait.get("band") or input_band(wait.get("share", 0.0))
    share = f"data wait {wait['share']:.1%}{_ci(wait['low'] * 100, wait['high'] * 100, '.1f', '%')}"
    if not wait.get("band"):
        share += f" (the interval spans the {wait.get('edge', 0):.0%} edge: {wait.get('between')}; --rounds narrows it)"
    reconciled = f"{share}; {stages['reconcile']}" if stages.get("reconcile") else share
    input_bound = band in ("moderately input-bound", "highly input-bound")
    nw = stages.get("num_workers")
    busy = _busy_finding(d, result)
    if input_bound:
        if nw == 0:
            k = workers.get("tried") or 2
            out.append(
                _finding(
                    f"{band}: num_workers=0, the training process loads every batch between its steps",
                    f"{reconciled}; the training process spends {stages.get('main_load_ms_per_step') or 0:.3g} ms of "
                    "CPU per step in next(loader)",
                    f"DataLoader(num_workers={k}, persistent_workers=True)",
                    "num_workers",
                    predict_workers(d, k, result),
                    _measured(d, "workers"),
                )
            )
        out += _stage_findings(d, result, band, share if nw == 0 else reconciled, share)
        if (nw or 0) > 0:
            k = workers.get("tried")
            title = f"num_workers {nw} -> {k}" if k is not None else "the number of workers"
            out.append(
                _finding(
                    title,
                    f"loader capacity {stages.get('capacity_samples_per_s') or 0:.4g} samples/s from the stages"
                    + (f", headroom x{stages['headroom']:.2f}" if stages.get("headroom") else "")
                    + (f"; {workers['reason']}" if workers.get("reason") else ""),
                    f"DataLoader(num_workers={k})" if k is not None else "cut the loader's cost per sample (above)",
                    "num_workers",
                    predict_workers(d, k, result) if k is not None else {"reason": workers.get("reason", "")},
                    _measured(d, "workers"),
                )
            )
        if busy:
            out.append(busy)
    else:
        parts = d.ledger.get("parts", {})
        compute = parts.get("compute")
        evidence = f"{share}"
        if compute is not None:
            evidence += f"; compute {compute:.3g} of {d.ledger['step_ms']:.3g} ms per step"
        step = _finding(
            "not input-bound: the step itself is the bottleneck",
            evidence,
            _step_fix(result),
            "step",
            {"reason": "the gain of mixed precision or compile depends on the model: measure it with perfsuite ab"},
            {"reason": "not tried: a change to the step"},
        )
        rest_share = d.ledger.get("shares", {}).get("the rest", 0.0)
        first = bool(busy) and rest_share > d.ledger.get("shares", {}).get("compute", 0.0)
        out += [f for f in ([busy, step] if first else [step, busy]) if f]
        # Every loader cost still maps to its fix (a small gain where the step hardly waits), the tried one measured.
        out += _stage_findings(d, result, band, reconciled, share)
    if not busy:
        for note in sorted({n for n in result.notes if n.startswith("oversubscribed:")}):
            what, _, advice = note.removeprefix("oversubscribed: ").rpartition(" (")
            out.append(
                _finding("oversubscribed cores", what, advice.rstrip(")"), "cores", None, _measured(d, "threads"))
            )
    if d.periodic.get("found"):
        p = d.periodic
        per = d.ledger.get("periodic_syncs", [])
        reads = "".join(f"; its reads: {s['op']} at {s['site']}, {s['seen']}" for s in per[:3])
        out.append(
            _finding(
                f"periodic work every {p['every']} steps (an evaluation, a checkpoint, logging)",
                f"{p['steps']} step(s) of the window took {p['long_step_ms']:.3g} ms of their own work against the "
                f"median step's; {p['extra_ms_per_step']:.3g} ms/step, {p['share']:.0%} of the window's time{reads}. "
                "Kept out of input efficiency and the input's cost",
                "run it less often, or asynchronously (a separate process or stream for evaluation and checkpoints)",
                "periodic",
                {
                    "ratio": _ratio(d.ledger["step_ms"], d.ledger["step_ms"] - p["extra_ms_per_step"]),
                    "basis": "the upper bound: the periodic work removed",
                },
                {"reason": "not tried: its interval is the job's choice"},
            )
        )
    syncs = d.ledger.get("syncs_per_step") or 0.0
    if syncs > 0:
        sites = d.ledger.get("sync_sites", {})
        top = ", ".join(f"{site} ({t:.3g} ms)" for site, t in list(sites.items())[:3])
        on_cpu = not d.device.startswith("cuda")
        parts = d.ledger.get("parts", {})
        ms = parts.get("reads to Python" if on_cpu else "host syncs") or 0.0
        periodic = d.ledger.get("periodic_syncs", [])
        beside = (
            "; beside them, every N steps: "
            + ", ".join(f"{s['op']} at {s['site']} ({s['seen']}, {s['per_step']:.3g}/step)" for s in periodic[:3])
            if periodic
            else ""
        )
        out.append(
            _finding(
                f"host syncs: {syncs:g} per step",
                f"{top or 'sites unknown'}{beside}"
                + (
                    "; on this CPU run a read to Python waits for no device queue: the time shown is the op's own; "
                    "on a GPU each one stalls until the queued work drains"
                    if on_cpu
                    else ""
                ),
                "read the value every N steps, or keep it on the device (accumulate the loss; log_interval)",
                "syncs",
                {
                    "ratio": _ratio(_steady(d), _steady(d) - float(ms)),
                    "basis": f"the reads' {ms:.3g} ms/step removed"
                    + (" (a CPU run: on a GPU the gain is the queue's drain, not shown here)" if on_cpu else ""),
                },
                {"reason": "not tried: a change to the step's code"},
            )
        )
    return out


def _step_fix(result: Result) -> str:
    knobs = result.knobs
    fixes = []
    if "amp" in knobs and knobs.get("amp") is None:
        fixes.append("amp='bf16'")
    if "compile" in knobs and knobs.get("compile") is None:
        fixes.append("compile='default'")
    if fixes:
        return "speed up the step: " + ", ".join(fixes)
    return "speed up the step itself (mixed precision, torch.compile, a cheaper model); the input keeps up"
