"""One Result from every rank's: the job's figures, each rank's own, the straggler, and scaling efficiency.

Pure functions over what each rank gathered (:class:`RankReport`); rank 0
calls :func:`merge` after ``torch.distributed.gather_object``. The job's
figures follow what a synchronous data-parallel step is: it ends when its
slowest rank does.

* step_ms per step is the slowest rank's; samples/s counts every rank's
  samples over the longest window.
* data_wait_frac, input_efficiency and every exact or noisy metric are the
  worst rank's (by the metric's better direction), with ``by_rank`` in the
  detail and a note when ranks disagree: a ``.item()`` on rank 0 only shows
  as syncs_per_step 1 with rank 1 at 0.
* straggler_wait_frac: at each collective (DDP's buffer broadcast at the
  forward, the gradient all-reduce) the first rank to arrive waits for the
  last. Each rank's *busy* time since the previous collective is measured on
  its own clock (perfsuite.probes.ranks); per step, the spread of busy times
  at each collective over the step time is the share of the step lost
  waiting. The straggler is the rank with the largest mean lag, and its phase
  the busy phase (loader, host prep, forward+backward, after backward) in
  which it exceeds the median rank most. Backward time as a whole is not
  used: the all-reduce evens it out across ranks.
* input_skew_frac: per step, the largest rank's fetch share minus the
  median rank's.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core.results import Metric, RankResult, Result
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.ranks import PHASE_KEYS, PHASES

# A straggler is named when its mean lag is at least this share of the median step (below it ranks arrive
# together) and it is the last to arrive in at least MAJORITY of the steps (noise makes every rank last by turns).
NOTICE_SHARE = 0.10
MAJORITY = 0.75
# An input straggler is named when its fetch share exceeds the median rank's by this much on average.
INPUT_NOTICE = 0.05
RUNNER_OWN = ("samples_per_s", "step_ms", "step_ms_p99", "step_ms_max", "stalls")
MERGED_HERE = ("straggler_wait_frac", "input_skew_frac", "dataset_passes_per_epoch", "cpu_oversubscription")


@dataclass
class RankReport:
    """What one rank sends rank 0: its Result and what the rank probe recorded."""

    rank: int
    result: Result
    phases: dict[str, list[float]] = field(default_factory=dict)
    sync_forward: bool | None = None
    straggler_reason: str | None = None
    epoch_samples: int | None = None
    dataset_len: int | None = None
    sampler_reason: str | None = None
    threads: int = 1
    workers: int = 0
    pid: int = 0


def merge(reports: Sequence[RankReport], cores: int) -> Result:
    """The job's Result from every rank's report (any order); see the module docstring."""
    from perfsuite.harness.runner import _core_metrics

    reports = sorted(reports, key=lambda r: r.rank)
    if [r.rank for r in reports] != list(range(len(reports))):
        raise ValueError(f"rank reports {[r.rank for r in reports]}: need ranks 0..N-1 once each")
    first = reports[0].result
    n = min(len(r.result.samples.get("step_ms", [])) for r in reports)
    step_ms = [max(r.result.samples["step_ms"][i] for r in reports) for i in range(n)]
    walls = [float(r.result.metric("samples_per_s").detail.get("wall_s", 0.0)) for r in reports]
    delivered = sum(int(r.result.metric("samples_per_s").detail.get("samples", 0)) for r in reports)
    window = WindowTimings(0.0, max(walls), n, first.batch_size, step_ms=step_ms, samples=delivered)
    metrics: dict[str, Metric] = {}
    notes: list[str] = []
    for m in _core_metrics(window):
        metrics[m.name] = m
    metrics["samples_per_s"].detail["ranks"] = len(reports)
    names = list(dict.fromkeys(name for r in reports for name in r.result.metrics))
    for name in names:
        if name in RUNNER_OWN or name in MERGED_HERE:
            continue
        metrics[name], note = worst(name, {r.rank: r.result.metric(name) for r in reports})
        if note:
            notes.append(note)
    if "input_efficiency" in metrics:
        metrics["input_efficiency"] = bounded_efficiency(metrics["input_efficiency"], len(reports))
    samples: dict[str, list[float]] = {"step_ms": step_ms}
    wait_rank = _rank_of(metrics.get("data_wait_frac"))
    for key in ("fetch_ms", "data_wait"):
        samples[key] = list(reports[wait_rank].result.samples.get(key, []))
    epoch_rank = _rank_of(metrics.get("epoch_fetch_ms"))
    samples["epoch_fetch_ms"] = list(reports[epoch_rank].result.samples.get("epoch_fetch_ms", []))
    if "epoch_start_step" in reports[epoch_rank].result.samples:  # a rank of an older perfsuite kept no positions
        samples["epoch_start_step"] = list(reports[epoch_rank].result.samples["epoch_start_step"])
    samples["sol_step_ms"] = list(first.samples.get("sol_step_ms", []))
    straggler, samples["straggler_wait"] = straggler_wait(reports, step_ms)
    skew, samples["input_skew"] = input_skew(reports)
    metrics["straggler_wait_frac"], metrics["input_skew_frac"] = straggler, skew
    metrics["dataset_passes_per_epoch"] = dataset_passes(reports)
    metrics["cpu_oversubscription"] = oversubscription(reports, cores)
    ranks = tuple(rank_result(r) for r in reports)
    knobs = {**first.knobs, "nproc_per_node": len(reports), "omp_num_threads": reports[0].threads}
    all_notes = list(dict.fromkeys(note for r in reports for note in r.result.notes)) + notes
    return replace(first, knobs=knobs, metrics=metrics, samples=samples, notes=tuple(all_notes), ranks=ranks)


def bounded_efficiency(metric: Metric, nproc: int) -> Metric:
    """input_efficiency on several ranks, never above 1.

    Each rank's speed-of-light steps still wait for the other ranks at every all-reduce, so they are not the
    step without its loader alone; when even the worst rank's window beat them, the ratio says the machine
    (load, the other ranks) set both, and it is not reported as an efficiency.
    """
    if not metric.available or float(metric.value) <= 1.0:  # type: ignore[arg-type]
        return metric
    return Metric(
        metric.name,
        None,
        metric.unit,
        reason=f"on {nproc} ranks the window ran faster than the speed-of-light steps (x{float(metric.value):.3f} "  # type: ignore[arg-type]
        f"on rank {metric.detail.get('rank')}, the worst rank): those steps also wait for the other ranks at each "
        "all-reduce, and under load the ratio is not an efficiency",
        detail=metric.detail,
    )


def _rank_of(metric: Metric | None) -> int:
    rank = metric.detail.get("rank", 0) if metric is not None and metric.available else 0
    return int(rank) if isinstance(rank, int) else 0


def worst(name: str, by_rank: Mapping[int, Metric]) -> tuple[Metric, str | None]:
    """The job's value of a per-rank metric: the worst rank's, by the metric's better direction.

    Returns (metric, a note when ranks disagree). Labels that differ are joined rank by rank.
    """
    spec = registry.find(name)
    available = {r: m for r, m in by_rank.items() if m.available}
    first = by_rank[min(by_rank)]
    if not available:
        return first, None
    missing = {str(r): m.reason for r, m in by_rank.items() if not m.available}
    values = {str(r): m.value for r, m in available.items()}
    distinct = len({repr(v) for v in values.values()}) > 1
    if spec is not None and spec.kind == "label":
        rank = min(available)
        value: Any = " | ".join(f"rank {r}: {v}" for r, v in values.items()) if distinct else available[rank].value
    else:
        better = spec.better if spec is not None else None
        pick = min if better == "higher" else max
        rank = pick(available, key=lambda r: (_number(available[r].value), -r))
        value = available[rank].value
    detail = {**available[rank].detail, "rank": rank, "by_rank": values}
    if missing:
        detail["unavailable_on"] = missing
    note = None
    if distinct and (spec is None or spec.exact):
        note = f"{name} differs across ranks: " + ", ".join(f"rank {r} {_show(v)}" for r, v in values.items())
    return Metric(name, value, available[rank].unit, detail=detail), note


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _show(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def rank_result(report: RankReport) -> RankResult:
    """One rank's figures for Result.ranks: its metrics (step_ms with p50 and p95) and raw per-step series."""
    import numpy as np

    r = report.result
    metrics = dict(r.metrics)
    steps = r.samples.get("step_ms", [])
    if steps and "step_ms" in metrics and metrics["step_ms"].available:
        p50, p95 = np.percentile(np.asarray(steps, dtype=float), [50, 95])
        step = metrics["step_ms"]
        metrics["step_ms"] = replace(step, detail={**step.detail, "p50": float(p50), "p95": float(p95)})
    samples = {k: list(r.samples.get(k, [])) for k in ("step_ms", "fetch_ms", "data_wait")}
    samples.update({k: list(v) for k, v in report.phases.items()})
    return RankResult(report.rank, metrics, samples, pid=report.pid, threads=report.threads, workers=report.workers)


# --------------------------------------------------------------------------- straggler and input skew


def straggler_wait(reports: Sequence[RankReport], step_ms: Sequence[float]) -> tuple[Metric, list[float]]:
    """straggler_wait_frac and its per-step samples; the detail names the straggler rank and its phase."""
    name = "straggler_wait_frac"
    why = next((f"rank {r.rank}: {r.straggler_reason}" for r in reports if r.straggler_reason), None)
    if why is None and len(reports) < 2:
        why = "one rank: nobody waits for anybody"
    if why is not None:
        return Metric.unavailable(name, why, "fraction"), []
    n = min([len(step_ms)] + [len(r.phases.get(PHASE_KEYS[p], [])) for r in reports for p in PHASES])
    sync_forward = all(bool(r.sync_forward) for r in reports)
    segments: tuple[tuple[str, ...], ...] = (
        (("loader", "host prep", "after backward"), ("forward+backward",)) if sync_forward else (PHASES,)
    )
    ranks = [r.rank for r in reports]
    phase = {r.rank: {p: r.phases[PHASE_KEYS[p]] for p in PHASES} for r in reports}
    lag = {r: [0.0] * n for r in ranks}
    shares: list[float] = []
    for i in range(n):
        wait = 0.0
        for seg in segments:
            busy = {r: sum(phase[r][p][i] for p in seg) for r in ranks}
            low = min(busy.values())
            wait += max(busy.values()) - low
            for r in ranks:
                lag[r][i] += busy[r] - low
        shares.append(min(1.0, wait / step_ms[i]) if step_ms[i] > 0 else 0.0)
    if n == 0:
        return Metric.unavailable(name, "no measured step carried the phases of every rank", "fraction"), []
    mean_lag = {r: statistics.fmean(lag[r]) for r in ranks}
    slow = max(ranks, key=lambda r: (mean_lag[r], -r))
    last = sum(1 for i in range(n) if max(ranks, key=lambda r: (lag[r][i], -r)) == slow)
    others = [r for r in ranks if r != slow]
    # Against the other ranks' median, so with two ranks it is the difference to the other one.
    excess = {
        p: statistics.fmean(phase[slow][p][i] - statistics.median(phase[r][p][i] for r in others) for i in range(n))
        for p in PHASES
    }
    cause = max(PHASES, key=lambda p: excess[p])
    median_step = statistics.median(step_ms[:n])
    named = mean_lag[slow] >= NOTICE_SHARE * median_step and last >= MAJORITY * n and excess[cause] > 0
    first_bucket = {r.rank: statistics.fmean(r.phases.get("first_bucket_ms", [0.0])[:n] or [0.0]) for r in reports}
    detail: dict[str, Any] = {
        "rank": slow if named else None,
        "phase": cause if named else None,
        "lag_ms_by_rank": {str(r): round(mean_lag[r], 3) for r in ranks},
        "last_in_steps": f"{last}/{n}",
        "excess_ms_by_phase": {p: round(excess[p], 3) for p in PHASES},
        "first_bucket_ms_by_rank": {str(r): round(v, 3) for r, v in first_bucket.items()},
        "sync_points": "forward buffer broadcast, gradient all-reduce" if sync_forward else "gradient all-reduce",
        "median_step_ms": round(median_step, 3),
        "summary": (
            f"rank {slow} arrives last in {last}/{n} steps, {mean_lag[slow]:.1f} ms after the first rank on "
            f"average ({mean_lag[slow] / median_step:.0%} of the median step): its {cause} phase runs "
            f"{excess[cause]:+.1f} ms against the other ranks"
            if named
            else f"no straggler: rank {slow} lags most, {mean_lag[slow]:.1f} ms per step on average and last in "
            f"{last}/{n} steps; a straggler lags {NOTICE_SHARE:.0%} of the median step ({median_step:.1f} ms) "
            f"and is last in {MAJORITY:.0%} of the steps"
        ),
    }
    return Metric(name, statistics.fmean(shares), "fraction", detail=detail), shares


def input_skew(reports: Sequence[RankReport]) -> tuple[Metric, list[float]]:
    """input_skew_frac and its per-step samples: the largest rank's fetch share minus the median rank's."""
    name = "input_skew_frac"
    if len(reports) < 2:
        return Metric.unavailable(name, "one rank: no other rank to compare its loader with", "fraction"), []
    series = {r.rank: r.result.samples.get("data_wait", []) for r in reports}
    n = min(len(s) for s in series.values())
    if n == 0:
        return Metric.unavailable(name, "no per-step fetch shares were recorded", "fraction"), []
    skews, excess = [], {r: 0.0 for r in series}
    for i in range(n):
        values = {r: s[i] for r, s in series.items()}
        mid = statistics.median(values.values())
        skews.append(max(0.0, max(values.values()) - mid))
        for r, v in values.items():
            excess[r] += (v - mid) / n
    lagging = max(excess, key=lambda r: (excess[r], -r))
    named = excess[lagging] >= INPUT_NOTICE
    detail = {
        "rank": lagging if named else None,
        "excess_by_rank": {str(r): round(v, 4) for r, v in excess.items()},
        "data_wait_by_rank": {str(r): round(statistics.fmean(s[:n]), 4) for r, s in series.items()},
        "summary": (
            f"rank {lagging}'s loader: its steps wait {excess[lagging]:.0%} more of their time in next(loader) "
            "than the median rank's"
            if named
            else f"no input straggler: no rank waits {INPUT_NOTICE:.0%} more for data than the median rank"
        ),
    }
    return Metric(name, statistics.fmean(skews), "fraction", detail=detail), skews


# --------------------------------------------------------------------------- sharding and cores


def dataset_passes(reports: Sequence[RankReport]) -> Metric:
    """Samples all ranks drew in one epoch over the dataset's length (1 sharded, N when every rank reads it all)."""
    name = "dataset_passes_per_epoch"
    for r in reports:
        if r.sampler_reason:
            return Metric.unavailable(name, f"rank {r.rank}: {r.sampler_reason}", "passes")
        if r.epoch_samples is None:
            return Metric.unavailable(
                name, f"rank {r.rank} drew no complete epoch in the run: run more steps", "passes"
            )
        if not r.dataset_len:
            return Metric.unavailable(name, f"rank {r.rank}: the dataset has no length", "passes")
    total = sum(int(r.epoch_samples or 0) for r in reports)
    length = int(reports[0].dataset_len or 0)
    return Metric(
        name,
        total / length,
        "passes",
        detail={"dataset_len": length, "epoch_samples_by_rank": {str(r.rank): r.epoch_samples for r in reports}},
    )


def oversubscription(reports: Sequence[RankReport], cores: int) -> Metric:
    """Threads the ranks ask for (intra-op threads + DataLoader workers, every rank) per usable core."""
    name = "cpu_oversubscription"
    if cores < 1:
        return Metric.unavailable(name, "the number of usable cores is unknown", "threads/core")
    asked = sum(r.threads + r.workers for r in reports)
    return Metric(
        name,
        asked / cores,
        "threads/core",
        detail={
            "usable_cores": cores,
            "threads_by_rank": {str(r.rank): r.threads for r in reports},
            "workers_by_rank": {str(r.rank): r.workers for r in reports},
            "rule": f"{len(reports)} ranks x (threads + workers) = {asked} on {cores} core(s)",
        },
    )


# --------------------------------------------------------------------------- scaling efficiency


def scaling_efficiency(pairs: Sequence[tuple[float, float]], nproc: int, confidence: float = 0.95) -> Metric:
    """N-rank samples/s over N x one-rank samples/s, from interleaved (one-rank, N-rank) pairs of runs.

    The estimate is the geometric mean of the per-pair ratios, its interval a t-interval on their logs (the
    pairs are interleaved, so slow drift of the machine cancels within a pair). An estimate above 1 is not
    reported as a figure: N ranks cannot beat N times one rank at the same per-rank batch, so it means the
    one-rank runs were slowed by something the N-rank runs were not; the interval's upper end is capped at 1.
    """
    from scipy import stats

    name = "scaling_efficiency"
    good = [(one, many) for one, many in pairs if one > 0 and many > 0]
    if nproc < 2:
        return Metric.unavailable(name, "one rank: scaling needs two or more", "fraction")
    if len(good) < 2:
        return Metric.unavailable(
            name,
            f"{len(good)} interleaved round(s): an interval needs 2 or more (scaling_rounds=3 or more)",
            "fraction",
        )
    logs = [math.log(many / (nproc * one)) for one, many in good]
    mean = statistics.fmean(logs)
    sem = statistics.stdev(logs) / math.sqrt(len(logs))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(logs) - 1)) * sem
    estimate, low, high = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    detail = {
        "rounds": len(good),
        "confidence": confidence,
        "low": low,
        "high": min(1.0, high),
        "one_rank_samples_per_s": [one for one, _ in good],
        "n_rank_samples_per_s": [many for _, many in good],
        "ratios": [math.exp(v) for v in logs],
    }
    if estimate > 1.0:
        return Metric(
            name,
            None,
            "fraction",
            reason=f"measured x{estimate:.3f} of N x one rank ({confidence:.0%} CI x{low:.3f}..x{high:.3f}) over "
            f"{len(good)} rounds: above 1 is not scaling but a one-rank run slowed by something else (load); "
            "re-run on a quieter machine or with more rounds",
            detail=detail,
        )
    return Metric(name, estimate, "fraction", detail=detail)


def rank_report(rank: int, result: Result, probe: Any) -> RankReport:
    """What one rank hands the launcher: its Result and what its rank probe saw (a job's rank or a script's)."""
    import torch

    return RankReport(
        rank=rank,
        result=result,
        phases=probe.phases,
        sync_forward=probe.sync_forward,
        straggler_reason=probe.straggler_reason,
        epoch_samples=probe.epoch_samples(),
        dataset_len=probe.dataset_len,
        sampler_reason=probe.sampler_reason,
        threads=torch.get_num_threads(),
        workers=probe.workers,
        pid=os.getpid(),
    )
