"""``perfsuite doctor``: one command that names a job's bottleneck in the seeds' terms, with evidence, and the fix.

It runs the job a few times (``rounds``) with every probe, the loader ledger and
the step ledger (:mod:`perfsuite.probes.stepledger`) attached, and where a
change can be measured it runs the changed job interleaved with the unchanged
one (ABAB... rounds, so the machine's drift falls on both):

* **the per-step time ledger**, adding up to the step's wall time: waiting for
  the batch (the window's ``next(loader)``), the host->device copy and the host
  syncs (timed in the observed steps, with their call sites), compute (the step
  fed a cached batch: the speed of light), and the rest (what the window's steps
  spent beyond those: contention, the allocator, Python);
* **the data-wait band** as TensorFlow's input-pipeline analyzer draws it (< 5%
  not input-bound, 5-20% moderately, > 20% highly), with a bootstrap interval
  over the window's steps; a band is called only when the interval clears its
  edges;
* **the loader stage that costs the most** per sample (the loader ledger's
  replayed stages, and what the worker processes cost beyond them);
* **the fix**, as the knob or the line to change, and its effect where a
  measurement can show it: fed a cached batch the step takes X ms, so fixing the
  input saves Y ms per step; ``num_workers`` w -> k, from interleaved runs.

The result is a plain dict (``to_dict``) that :mod:`perfsuite.report.doctor`
renders for people (terminal, markdown), as JSON, and as a timeline PNG.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.runner import INPUT_BANDS, RunSpec, input_band
from perfsuite.judge.contention import session_line as contention_line

DEFAULT_ROUNDS = 3
CONFIDENCE = 0.95
BOOTSTRAP = 2000


# --------------------------------------------------------------------------- statistics


def _bootstrap(values: Sequence[Sequence[float]], stat: Callable[[list[list[float]]], float], seed: int = 0) -> tuple:
    """(estimate, low, high): a stratified percentile bootstrap (each round's steps resampled within the round)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    groups = [np.asarray(v, dtype=float) for v in values if len(v)]
    estimate = stat([list(g) for g in groups])
    draws = []
    for _ in range(BOOTSTRAP):
        draws.append(stat([list(g[rng.integers(0, len(g), len(g))]) for g in groups]))
    lo, hi = np.percentile(draws, [(1 - CONFIDENCE) / 2 * 100, (1 + CONFIDENCE) / 2 * 100])
    return float(estimate), float(lo), float(hi)


def _pooled_mean(groups: list[list[float]]) -> float:
    values = [x for g in groups for x in g]
    return sum(values) / len(values) if values else 0.0


def _median(groups: list[list[float]]) -> float:
    import numpy as np

    return float(np.median([x for g in groups for x in g]))


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


def clone_loader(loader: Any, num_workers: int) -> Any:
    """The same DataLoader (dataset, sampler, collate_fn, pinning) with another number of workers."""
    from torch.utils.data import DataLoader

    kwargs: dict[str, Any] = {
        "num_workers": num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout if num_workers > 0 else 0,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context if num_workers > 0 else None,
        "generator": loader.generator,
        # From num_workers=0 the fix tried is the one the doctor names: workers that persist across epochs.
        "persistent_workers": num_workers > 0 and (bool(loader.persistent_workers) or loader.num_workers == 0),
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


def with_workers(spec: RunSpec, k: int) -> RunSpec:
    """The run with ``num_workers=k``: a reference workload's knob, or the user's DataLoader cloned before it binds."""
    from perfsuite.jobs.contract import Job
    from perfsuite.jobs.registry import is_job_target

    if not is_job_target(spec.workload):
        flat: dict[str, Any] = {"num_workers": k}
        if k == 0:
            flat.update(persistent_workers=False, prefetch_factor=None)
        elif spec.knobs.loader.num_workers == 0:
            flat.update(persistent_workers=True)
        return dataclasses.replace(spec, knobs=spec.knobs.replace(**flat))
    if isinstance(spec.workload, Job):  # one Job object serves every run: change a copy, never the user's
        job = spec.workload
        if job.loader is not None:
            return dataclasses.replace(spec, workload=dataclasses.replace(job, loader=clone_loader(job.loader, k)))
        kwargs = {**job.loader_kwargs, "num_workers": k}
        return dataclasses.replace(spec, workload=dataclasses.replace(job, loader_kwargs=kwargs))
    previous = spec.mutate

    def mutate(job: Any) -> None:
        if previous is not None:
            previous(job)
        if job.loader is not None:
            job.loader = clone_loader(job.loader, k)
        else:
            job.loader_kwargs = {**job.loader_kwargs, "num_workers": k}

    return dataclasses.replace(spec, mutate=mutate)


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
    workers: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    counterfactuals: list[dict[str, Any]] = field(default_factory=list)  # a script's (perfsuite.tools.doctor_script)
    counterfactuals_reason: str = ""

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
            "workers": self.workers,
            "observed": self.observed,
            "timeline": _timeline(last, self.observed) if last else {},
            "notes": self.notes,
            "contention": contention_line({f"run {i + 1}": r for i, r in enumerate(self.results)}),  # or None
            "counterfactuals": self.counterfactuals,
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


def diagnose(
    spec: RunSpec,
    target: str,
    rounds: int = DEFAULT_ROUNDS,
    counterfactuals: bool = True,
    progress: Callable[[str], None] = lambda s: None,
) -> Diagnosis:
    """Run ``spec`` ``rounds`` times (and its counterfactuals, interleaved) and say what limits it."""
    from perfsuite.core.cores import usable_cores
    from perfsuite.harness.runner import default_probes, run
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
    cf_runs: list[Result] = []
    cf_workers: int | None = None
    for r in range(rounds):
        order = ["base", "cf"] if r % 2 == 0 else ["cf", "base"]
        for arm in order:
            if arm == "cf":
                if cf_workers is None or not counterfactuals:
                    continue
                progress(f"round {r + 1}/{rounds}: num_workers={cf_workers}")
                cf_runs.append(run(with_workers(spec, cf_workers), default_probes()))
                continue
            progress(f"round {r + 1}/{rounds}: as it is")
            probe = StepLedgerProbe()
            result = run(spec, [*default_probes(), probe])
            base_runs.append(result)
            ledgers.append(probe)
            if r == 0 and counterfactuals:  # the first run says what to try: it runs next, in this round
                workers = result.knobs.get("num_workers")
                if isinstance(workers, int) and _rebuildable(result):
                    cf_workers = more_workers(workers, usable)
    return assess(target, base_runs, ledgers, cf_runs, cf_workers, usable)


def _rebuildable(result: Result) -> bool:
    """Whether the run's loader is a DataLoader perfsuite can clone with other workers (its knobs were read)."""
    return "num_workers" in result.knobs and not str(result.knob_sources.get("num_workers", "")).startswith("not known")


# --------------------------------------------------------------------------- assessment


def assess(
    target: str,
    base_runs: Sequence[Result],
    ledgers: Sequence[Any],
    cf_runs: Sequence[Result],
    cf_workers: int | None,
    usable: int,
) -> Diagnosis:
    """Turn the runs into the ledger, the band, the stages, the counterfactuals and the findings."""
    last = base_runs[-1]
    d = Diagnosis(target, len(base_runs), last.fingerprint.device, list(base_runs))
    d.notes = sorted({n for r in base_runs for n in r.notes if not n.startswith("oversubscribed:")})
    fetch = [r.samples.get("fetch_ms", []) for r in base_runs]
    host = [r.samples.get("host_step_ms", []) for r in base_runs]
    sol = [r.samples.get("sol_step_ms", []) for r in base_runs]
    d.wait = wait_band(fetch, host)
    d.observed = _observed(ledgers)
    d.ledger = _ledger(fetch, host, sol, d.observed, last.fingerprint.device)
    d.stages = _stages(last)
    d.cached = _cached(host, sol)
    d.workers = _workers(base_runs, cf_runs, cf_workers, usable)
    d.findings = _findings(d, last)
    return d


def _observed(ledgers: Sequence[Any]) -> dict[str, Any]:
    summaries = [p.summary() for p in ledgers]
    summaries = [s for s in summaries if s.get("observed_steps")]
    if not summaries:
        return {"observed_steps": 0}
    n = len(summaries)
    sites: dict[str, float] = {}
    for s in summaries:
        for site, ms in s["sync_sites"].items():
            sites[site] = sites.get(site, 0.0) + ms / n
    return {
        "observed_steps": sum(s["observed_steps"] for s in summaries),
        "sync_ms": sum(s["sync_ms"] for s in summaries) / n,
        "copy_ms": sum(s["copy_ms"] for s in summaries) / n,
        "syncs_per_step": sum(s["syncs_per_step"] for s in summaries) / n,
        "sync_sites": sites,
        "steps": summaries[-1]["steps"],
    }


def _mean(groups: Sequence[Sequence[float]]) -> float:
    values = [x for g in groups for x in g]
    return sum(values) / len(values) if values else 0.0


def _ledger(
    fetch: Sequence[Sequence[float]],
    host: Sequence[Sequence[float]],
    sol: Sequence[Sequence[float]],
    observed: dict[str, Any],
    device: str,
) -> dict[str, Any]:
    """Per step, in ms: wait + copy + syncs + compute + rest = the window's mean step (fetch included)."""
    import statistics

    step, wait = _mean(host), _mean(fetch)
    copy = float(observed.get("copy_ms", 0.0))
    syncs = float(observed.get("sync_ms", 0.0))
    sol_values = [x for g in sol for x in g]
    compute = max(0.0, statistics.median(sol_values) - syncs) if sol_values else None
    parts = {"wait for the batch": wait, "host->device copy": copy, "host syncs": syncs}
    if compute is not None:
        parts["compute"] = compute
    rest = step - sum(parts.values())
    parts["the rest"] = rest
    notes = []
    if not device.startswith("cuda"):
        notes.append(
            "a CPU run has no device: the copy is free and a sync waits for nothing, so both read ~0 here; "
            "on a GPU each sync waits for the queued work"
        )
    if compute is None:
        notes.append("no speed-of-light steps: compute is not told apart from the rest")
    if rest < 0:
        notes.append(
            "the rest is negative: the window's steps ran faster than the parts measured apart (the cached-batch "
            "steps and the observed steps ran on a busier machine)"
        )
    return {
        "step_ms": step,
        "parts": parts,
        "shares": {k: (v / step if step > 0 else 0.0) for k, v in parts.items()},
        "sync_sites": observed.get("sync_sites", {}),
        "syncs_per_step": observed.get("syncs_per_step", 0.0),
        "notes": notes,
    }


def _stages(result: Result) -> dict[str, Any]:
    """The loader's cost per sample by stage, the processes' overhead beyond them, and the costliest."""
    m = result.metric("loader_cpu_ms_per_sample")
    process = result.metric("loader_process_cpu_ms_per_sample")
    main = result.metric("main_load_ms_per_step")
    capacity = result.metric("loader_capacity_samples_per_s")
    headroom = result.metric("loader_headroom")
    out: dict[str, Any] = {
        "available": m.available,
        "reason": m.reason,
        "num_workers": result.knobs.get("num_workers"),
        "main_load_ms_per_step": main.value,
        "capacity_samples_per_s": capacity.value,
        "capacity_after_overhead": capacity.detail.get("after_overhead"),
        "headroom": headroom.value,
        "headroom_reason": headroom.reason,
        "demand": headroom.detail.get("demand"),
    }
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
    return out


def _cached(host: Sequence[Sequence[float]], sol: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Fed a cached batch, the step takes X ms [CI]; fixing the input would save Y ms per step [CI]."""
    if not any(sol) or not any(host):
        return {"available": False, "reason": "no speed-of-light steps were run"}
    x, x_lo, x_hi = _bootstrap(sol, _median, seed=2)
    h, h_lo, h_hi = _bootstrap([list(g) for g in host], _pooled_mean, seed=3)  # the ledger's mean step
    return {
        "available": True,
        "step_ms": h,
        "cached_ms": x,
        "cached_low": x_lo,
        "cached_high": x_hi,
        "saves_ms": h - x,
        "saves_low": h_lo - x_hi,
        "saves_high": h_hi - x_lo,
        "confidence": CONFIDENCE,
    }


def _workers(base: Sequence[Result], cf: Sequence[Result], k: int | None, usable: int) -> dict[str, Any]:
    workers = base[-1].knobs.get("num_workers")
    out: dict[str, Any] = {"num_workers": workers, "usable_cores": usable, "tried": k}
    if k is None:
        out["reason"] = (
            f"num_workers={workers} already uses every one of the {usable} usable core(s): more workers would "
            "take turns on them"
            if isinstance(workers, int)
            else "the loader is not a DataLoader whose workers perfsuite can change"
        )
        return out
    if not cf:
        out["reason"] = "not run (--no-counterfactuals)"
        return out
    b = [r.value("samples_per_s") or 0.0 for r in base][: len(cf)]
    h = [r.value("samples_per_s") or 0.0 for r in cf]
    out.update(ratio_interval(b, h))
    out["base_samples_per_s"] = b
    out["samples_per_s"] = h
    return out


# --------------------------------------------------------------------------- findings


def _finding(title: str, evidence: str, fix: str, effect: str = "", kind: str = "") -> dict[str, Any]:
    return {"title": title, "evidence": evidence, "fix": fix, "effect": effect, "kind": kind}


def _ci(lo: float | None, hi: float | None, fmt: str = ".3g", unit: str = "") -> str:
    if lo is None or hi is None:
        return ""
    return f" [{CONFIDENCE:.0%} CI {lo:{fmt}}{unit}..{hi:{fmt}}{unit}]"


STAGE_FIXES = {
    "collate_fn": "make {code} cheap: stack arrays (torch.utils.data.default_collate) instead of per-sample Python",
    "transform": "move the random part of {code} to the device, batched (perfsuite: aug='gpu'; Kornia), "
    "or make it cheaper",
    "__getitem__": "{code} reads and decodes: store images at the size you train on, or decode faster "
    "(torchvision.io.decode_jpeg)",
    "pin_memory": "pin fewer bytes: ship uint8 from the loader and convert on the device",
    "worker processes": "DataLoader(persistent_workers=True): the workers are forked again at every epoch now",
    "worker processes (persistent)": "a larger batch_size: fewer batches to pass between processes per sample",
}


def _findings(d: Diagnosis, result: Result) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    wait, stages, cached, workers = d.wait, d.stages, d.cached, d.workers
    band = wait.get("band")
    share = f"data wait {wait['share']:.1%}{_ci(wait['low'] * 100, wait['high'] * 100, '.1f', '%')}"
    saves = ""
    if cached.get("available"):
        saves = (
            f"fed a cached batch the step takes {cached['cached_ms']:.3g} ms"
            f"{_ci(cached['cached_low'], cached['cached_high'], '.3g', ' ms')}: the input (waiting for batches, "
            f"and the loader's share of the cores) costs {cached['saves_ms']:.3g} ms/step"
            f"{_ci(cached['saves_low'], cached['saves_high'], '.3g', ' ms')}"
        )
    workers_effect = ""
    if workers.get("pairs"):
        ratio = workers["ratio"]
        workers_effect = (
            f"num_workers {workers['num_workers']} -> {workers['tried']}: {ratio - 1:+.0%} samples/s"
            + (
                _ci((workers["low"] - 1) * 100, (workers["high"] - 1) * 100, "+.0f", "%")
                if workers.get("low") is not None
                else ""
            )
            + f" ({workers['pairs']} interleaved pair(s))"
        )
    if band in ("moderately input-bound", "highly input-bound"):
        nw = stages.get("num_workers")
        if nw == 0:
            k = workers.get("tried")
            out.append(
                _finding(
                    f"{band}: num_workers=0, the training process loads every batch between its steps",
                    f"{share}; the training process spends {stages.get('main_load_ms_per_step') or 0:.3g} ms of "
                    "CPU per step in next(loader)",
                    f"DataLoader(num_workers={k or 2}, persistent_workers=True)",
                    "; ".join(x for x in (workers_effect, saves) if x),
                    "num_workers",
                )
            )
        costliest = stages.get("costliest")
        if costliest:
            code = stages["code"].get(costliest, costliest)
            ms = stages["by"][costliest]
            out.append(
                _finding(
                    f"{band}: the loader's costliest stage is {costliest}",
                    f"{share}; {costliest} ({code}) costs {ms:.3g} ms of CPU per sample, "
                    f"{stages['shares'][costliest]:.0%} of the loader's",
                    _stage_fix(costliest, code, result),
                    saves,
                    f"stage:{costliest}",
                )
            )
        headroom = stages.get("headroom")
        if workers_effect and (nw or 0) > 0:
            out.append(
                _finding(
                    "more workers" if workers.get("ratio", 1) > 1 else "more workers do not help here",
                    f"loader capacity {stages.get('capacity_samples_per_s') or 0:.4g} samples/s"
                    + (f", headroom x{headroom:.2f} ({stages.get('demand')})" if headroom else ""),
                    f"DataLoader(num_workers={workers['tried']})",
                    workers_effect,
                    "num_workers",
                )
            )
        elif workers.get("reason") and (nw or 0) > 0:
            out.append(
                _finding(
                    "more workers cannot help here",
                    workers["reason"],
                    "cut the loader's cost per sample (above), or run on a machine with more cores",
                    "",
                    "num_workers",
                )
            )
    elif band == "not input-bound":
        parts = d.ledger.get("parts", {})
        compute = parts.get("compute")
        evidence = f"{share}"
        if compute is not None:
            evidence += f"; compute {compute:.3g} of {d.ledger['step_ms']:.3g} ms per step"
        out.append(
            _finding(
                "not input-bound: the step itself is the bottleneck",
                evidence,
                _step_fix(result),
                saves,
                "step",
            )
        )
    else:
        out.append(
            _finding(
                f"data wait between bands ({wait.get('between')})",
                f"{share}: the interval spans the {wait.get('edge', 0):.0%} edge, so no band is called",
                "run longer (--steps, --rounds) to narrow the interval",
                saves,
                "undecided",
            )
        )
    rest_share = d.ledger.get("shares", {}).get("the rest", 0.0)
    for note in sorted({n for n in result.notes if n.startswith("oversubscribed:")}):
        what, _, advice = note.removeprefix("oversubscribed: ").rpartition(" (")
        if rest_share > 0.2:
            what += f"; the rest (beyond waiting, copies, syncs and compute) is {rest_share:.0%} of the step"
        out.append(_finding("oversubscribed cores", what, advice.rstrip(")"), "", "cores"))
    syncs = d.ledger.get("syncs_per_step") or 0.0
    if syncs > 0:
        sites = d.ledger.get("sync_sites", {})
        top = ", ".join(f"{site} ({ms:.3g} ms)" for site, ms in list(sites.items())[:3])
        on_cpu = not d.device.startswith("cuda")
        out.append(
            _finding(
                f"host syncs: {syncs:g} per step",
                f"{top or 'sites unknown'}"
                + ("; free on a CPU, but on a GPU each one stalls until the queued work drains" if on_cpu else ""),
                "read the value every N steps, or keep it on the device (accumulate the loss; log_interval)",
                "",
                "syncs",
            )
        )
    return out


def _stage_fix(stage: str, code: str, result: Result) -> str:
    if stage == "worker processes" and result.knobs.get("persistent_workers"):
        stage = "worker processes (persistent)"
    return STAGE_FIXES.get(stage, "make {code} cheaper").format(code=code)


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
