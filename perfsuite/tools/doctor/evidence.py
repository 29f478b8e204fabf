"""What the runs recorded, read once into typed figures: the window's, the loader ledger's, the machine's load.

Every figure comes from the Results' own records (and the step ledger's observed steps): contention from
each Result's ``environment["contention"]`` through the judge's reader
(:func:`perfsuite.judge.contention.load_of`, the one reader of those keys), the loader ledger from its
metrics, the periodic steps from what each run left out of its input efficiency. The doctor reads no
``/proc`` file of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfsuite.core.results import Result
from perfsuite.judge.contention import load_of, wall_bound
from perfsuite.probes.periods import Epochs
from perfsuite.tools.doctor import window
from perfsuite.tools.doctor.model import (
    CachedBatch,
    Contention,
    Efficiency,
    Ledger,
    Observed,
    Periodic,
    PeriodicSync,
    Stages,
    Unavailable,
    WaitBand,
    known,
)
from perfsuite.tools.doctor.stats import banded, wait_band

BUSY_PRESSURE = 0.20  # some task waited for a core this share of the time: the step's thread waits too
BUSY_RUN_QUEUE = 1.0  # runnable tasks per usable core
LOADER_BUSY = 0.25  # cores the loader keeps busy on average before sharing them with the step is a reason


@dataclass(frozen=True)
class Evidence:
    """Everything the findings read: the unchanged runs' figures, pooled over the rounds."""

    results: tuple[Result, ...]
    usable: int
    wait: WaitBand
    periodic: Periodic
    observed: Observed
    ledger: Ledger
    cached: CachedBatch | Unavailable
    efficiency: Efficiency | Unavailable
    stages: Stages
    contention: Contention

    @property
    def last(self) -> Result:
        return self.results[-1]

    @property
    def device(self) -> str:
        return self.last.fingerprint.device

    @property
    def steady_ms(self) -> float:
        """The steady mean step (ms): the window's mean step less the periodic work."""
        if isinstance(self.cached, CachedBatch):
            return self.cached.step_ms
        return self.ledger.step_ms - self.periodic.extra_ms_per_step


def gather(results: Sequence[Result], summaries: Sequence[Mapping[str, Any]], usable: int) -> Evidence:
    """The evidence of the unchanged runs (``summaries``: each run's step ledger, :class:`StepLedgerProbe`)."""
    last = results[-1]
    fetch = [list(r.samples.get("fetch_ms", [])) for r in results]
    host = [list(r.samples.get("host_step_ms", [])) for r in results]
    sol = [list(r.samples.get("sol_step_ms", [])) for r in results]
    periodic = window.periodic_work(
        fetch,
        host,
        [Epochs.of(r.samples) for r in results],
        [window.recorded_periodic(r) for r in results],
        window.sync_periods(last),
    )
    wait = gpu_idle_band(results) or wait_band(fetch, host)
    obs = observed(summaries, last)
    led = window.ledger(fetch, host, sol, obs, last.fingerprint.device, periodic)
    cached = window.cached_batch(host, sol, led, periodic, fetch)
    contention = contention_of(results, usable)
    eff = window.efficiency(host, sol, led, periodic, fetch)
    if not isinstance(eff, Unavailable) and contention.busy:
        eff = Efficiency(
            eff.value,
            eff.low,
            eff.high,
            eff.runs,
            eff.periodic_left_out,
            caveat="measured on a busy machine (" + "; ".join(contention.reasons) + "): its interval covers the "
            "runs' differences, not a quieter machine's figure",
        )
    return Evidence(
        tuple(results), usable, wait, periodic, obs, led, cached, eff, stages(last, wait.share, cached), contention
    )


GPU_IDLE = "GPU idle"


def gpu_idle_band(results: Sequence[Result]) -> WaitBand | None:
    """On CUDA, the band from the GPU's own idle time (``gpu_idle_frac``, CUDA events at the step edges) in place of
    the host's wait, which overlaps the GPU's work there; None where any run lacks it (a CPU run: the host's wait
    is the figure). Over several runs: their mean, within the span of their intervals."""
    if not results or not all(r.fingerprint.device.startswith("cuda") for r in results):
        return None
    metrics = [r.metric("gpu_idle_frac") for r in results]
    if not all(m.available and m.value is not None for m in metrics):
        return None
    values = [float(m.value) for m in metrics]  # type: ignore[arg-type]
    intervals = [m.detail.get("interval") or [v, v] for m, v in zip(metrics, values)]
    steps = sum(int(m.detail.get("steps") or 0) for m in metrics)
    low = min(float(i[0]) for i in intervals)
    high = max(float(i[1]) for i in intervals)
    return banded(sum(values) / len(values), low, high, steps, GPU_IDLE)


def observed(summaries: Sequence[Mapping[str, Any]], result: Result | None = None) -> Observed:
    """The step ledger's observed steps averaged over the runs, with the sync probe's reads every N steps."""
    kept = [s for s in summaries if s.get("observed_steps")]
    periodic: tuple[PeriodicSync, ...] = ()
    if result is not None:
        m = result.metric("syncs_per_step")
        if m.available:
            periodic = tuple(
                PeriodicSync(str(s["op"]), str(s["site"]), float(s["per_step"]), str(s.get("seen", "")))
                for s in m.detail.get("sites", [])
                if s.get("every") not in (None, 1)
            )
    if not kept:
        return Observed(periodic_syncs=periodic)
    n = len(kept)
    sites: dict[str, float] = {}
    for s in kept:
        for site, ms in s["sync_sites"].items():
            sites[site] = sites.get(site, 0.0) + float(ms) / n
    return Observed(
        observed_steps=sum(int(s["observed_steps"]) for s in kept),
        wall_ms=sum(float(s.get("wall_ms", 0.0)) for s in kept) / n,
        sync_ms=sum(float(s["sync_ms"]) for s in kept) / n,
        copy_ms=sum(float(s["copy_ms"]) for s in kept) / n,
        syncs_per_step=sum(float(s["syncs_per_step"]) for s in kept) / n,
        sync_sites=sites,
        steps=tuple(kept[-1].get("steps", [])),
        periodic_syncs=periodic,
    )


def _mean_of(values: Sequence[float | None], what: str) -> float | Unavailable:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else Unavailable(f"no run recorded its {what}")


def contention_of(results: Sequence[Result], usable: int) -> Contention:
    """The machine's load over the runs, from each Result's own contention record: whether other processes slow
    the step (their share of the cores, or runnable tasks beyond the job's own), and whether the job's own threads
    and workers exceed the cores."""
    loads = [load_of(r) for r in results]
    process = results[-1].metric("loader_process_cpu_ms_per_sample")
    busy_cores = process.detail.get("cores_busy") if process.available else None
    threads = [ld.threads for ld in loads if ld.threads is not None]
    workers = results[-1].knobs.get("num_workers")
    c = Contention(
        cpu_pressure=_mean_of([ld.pressure for ld in loads], "CPU pressure (no /proc/pressure/cpu?)"),
        runqueue_per_core=_mean_of([ld.runqueue for ld in loads], "run queue"),
        foreign=_mean_of([ld.foreign for ld in loads], "neighbours' share of the cores"),
        loader_cores_busy=float(busy_cores) if busy_cores is not None else Unavailable("no loader ledger"),
        usable_cores=usable,
        runs=len(results),
        threads=max(threads) if threads else None,
        workers=workers if isinstance(workers, int) else None,
    )
    return replace(c, reasons=tuple(neighbours(c)), own=tuple(own_load(c)))


def neighbours(c: Contention) -> list[str]:
    """Why other processes slow the step: their share of the usable cores beyond the wall-clock bound, or (where
    that share was not read) runnable tasks per core beyond the job's own; the pressure beside them, as context."""
    foreign, others = known(c.foreign), c.others_runnable_per_core
    reasons = []
    if foreign is not None and foreign > wall_bound():
        reasons.append(f"other processes and steal took {foreign:.0%} of the usable cores")
    if foreign is None and others is not None and others > BUSY_RUN_QUEUE:
        reasons.append(f"{others:.2g} runnable tasks per usable core beyond the job's own")
    pressure, queue = known(c.cpu_pressure), known(c.runqueue_per_core)
    if reasons and pressure is not None and pressure >= BUSY_PRESSURE:
        reasons.append(f"some task waited for a core {pressure:.0%} of the time (CPU pressure)")
    if reasons and queue is not None and queue > BUSY_RUN_QUEUE:
        reasons.append(f"{queue:.2g} runnable tasks per usable core")
    return reasons


def own_load(c: Contention) -> list[str]:
    """Why the job's own threads and workers slow its step: its intra-op threads and the cores its loader kept busy
    (its worker count where that was not read) beyond the usable cores."""
    threads, workers, usable = c.threads or 1, c.workers or 0, c.usable_cores
    loader = known(c.loader_cores_busy) if workers else 0.0  # without workers the loading is the training thread's
    if threads + (workers if loader is None else loader) <= usable:
        return []
    kept = f"{workers} loader worker(s)" + (f" keeping {loader:.2f} core(s) busy" if loader is not None else "")
    out = [
        f"the job's {threads} intra-op thread(s) and {kept} on {usable} usable core(s): the step and the loader "
        "take turns on the same cores"
    ]
    pressure, queue = known(c.cpu_pressure), known(c.runqueue_per_core)
    if pressure is not None and pressure >= BUSY_PRESSURE:
        out.append(f"some task waited for a core {pressure:.0%} of the time (CPU pressure, the job's own included)")
    if queue is not None and queue > BUSY_RUN_QUEUE:
        out.append(f"{queue:.2g} runnable tasks per usable core, the job's own included")
    return out


def stages(result: Result, wait_share: float | None = None, cached: CachedBatch | Unavailable | None = None) -> Stages:
    """The loader's cost per sample by stage, the processes' overhead beyond them; and one sentence that
    reconciles the headroom with the data wait."""
    m = result.metric("loader_cpu_ms_per_sample")
    process = result.metric("loader_process_cpu_ms_per_sample")
    capacity = result.metric("loader_capacity_samples_per_s")
    headroom = result.metric("loader_headroom")
    stages_capacity = float(capacity.value) if capacity.available else None  # type: ignore[arg-type]
    after = capacity.detail.get("after_overhead")
    if after is not None and stages_capacity is not None and after > stages_capacity:
        after = stages_capacity  # an older Result: the overhead is never negative (perfsuite.probes.loader)
    workers = result.knobs.get("num_workers")
    head = float(headroom.value) if headroom.available else None  # type: ignore[arg-type]
    demand = headroom.detail.get("demand")
    if isinstance(cached, CachedBatch) and (after or stages_capacity) and not str(demand).startswith("declared"):
        # One speed of light per report: the cached-batch step pooled over the runs, not the last run's own.
        rate = result.batch_size * 1e3 / cached.cached_ms
        head = float(after or stages_capacity) / rate  # type: ignore[arg-type]
        demand = f"the speed of light: fed a cached batch the step takes {rate:.4g} samples/s"
    by: dict[str, float] = {}
    code: dict[str, str] = {}
    epochs = int(process.detail.get("epochs_started") or 0) if process.available else 0
    if m.available:
        by = {str(k): float(v) for k, v in m.detail.get("by", {}).items()}
        code = {str(k): str(v) for k, v in m.detail.get("code", {}).items()}
        if process.available and isinstance(workers, int) and workers > 0:
            beyond = float(process.value) - float(m.value)  # type: ignore[arg-type]
            if beyond > 0:
                by["worker processes"] = beyond
                code["worker processes"] = (
                    "forking workers at each epoch and passing batches between processes"
                    if epochs and not result.knobs.get("persistent_workers")
                    else "passing batches between processes, the worker loop"
                )
    out = Stages(
        num_workers=workers if isinstance(workers, int) else None,
        persistent=bool(result.knobs.get("persistent_workers")),
        main_load_ms_per_step=known(result.value("main_load_ms_per_step")),
        capacity=stages_capacity,
        capacity_after_overhead=after,
        headroom=head,
        headroom_reason=headroom.reason,
        demand=demand,
        cores_busy=process.detail.get("cores_busy") if process.available else None,
        usable_cores=capacity.detail.get("usable_cores"),
        overhead_note=capacity.detail.get("overhead_note"),
        by=dict(sorted(by.items(), key=lambda kv: -kv[1])),
        code=code,
        process_ms_per_sample=known(process.value) if process.available else None,  # type: ignore[arg-type]
        unavailable=None if m.available else (m.reason or "the loader ledger measured no stage"),
        epochs_started=epochs,
    )
    if not m.available:
        return out
    return replace(out, reconcile=reconcile(out, result, wait_share))


def reconcile(s: Stages, result: Result, wait_share: float | None) -> str | None:
    """One sentence saying why a loader with headroom above 1 still leaves the step waiting (or None when it
    does not): the wait at epoch starts, which a steady capacity leaves out, and the cores the loader's
    processes share with the step, which the capacity counts as theirs."""
    if s.headroom is None or s.headroom < 1 or not wait_share or wait_share < 0.05:
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
    workers = s.num_workers or 0
    if (
        s.usable_cores
        and workers
        and workers + 1 > s.usable_cores
        and (s.cores_busy is None or s.cores_busy >= LOADER_BUSY)
    ):
        why.append(
            f"the capacity counts a core per process, but {workers} worker(s) and the training thread share "
            f"{s.usable_cores} core(s)"
            + (f" (the loader kept {s.cores_busy:.2f} busy on average)" if s.cores_busy is not None else "")
        )
    if not why:
        why.append("the loader delivers in bursts: its prefetch queue ran dry between them")
    return f"headroom x{s.headroom:.2f} yet data wait {wait_share:.0%}: " + "; and ".join(why)
