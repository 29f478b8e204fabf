"""The measured window's figures over the runs: periodic work, the per-step ledger, the cached-batch step, input
efficiency. Each takes the runs' per-step samples and returns a typed figure or :class:`Unavailable` with why."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from perfsuite.core.results import Result
from perfsuite.probes.periods import Epochs, WindowPeriodic, window_periodic
from perfsuite.tools.doctor.model import (
    CachedBatch,
    Efficiency,
    Ledger,
    Observed,
    Periodic,
    Unavailable,
    known,
)
from perfsuite.tools.doctor.stats import mean, two_level

SOL_SLACK = 0.05  # the cached-batch step may read this much above the window's own step work (a median of 5)
Runs = Sequence[Sequence[float]]


def work_of(fetch: Sequence[float], host: Sequence[float]) -> list[float]:
    """Each step's own work: its wall time less its wait for the batch (ms)."""
    return [max(0.0, b - a) for a, b in zip(fetch, host)]


def recorded_periodic(result: Result) -> WindowPeriodic | None:
    """The periodic steps the run itself left out of input efficiency (:func:`perfsuite.harness.runner.
    periodic_extra_s`), or None for a Result that did not record their positions (the doctor then asks the same
    detector, :func:`perfsuite.probes.periods.window_periodic`)."""
    detail = result.metric("input_efficiency").detail
    if "periodic_left_out" not in detail:
        return None
    left = detail["periodic_left_out"]
    if left is None:
        return WindowPeriodic(None, reason=detail.get("periodic_unknown") or "no periodic work in the window")
    if "at" not in left:
        return None
    return WindowPeriodic(int(left["every"]), tuple(int(i) for i in left["at"]), float(left["extra_ms"]))


def sync_periods(result: Result) -> tuple[int, ...]:
    """The periods the sync probe's scan saw (reads every N steps): the detector's hints."""
    sites = result.metric("syncs_per_step").detail.get("sites", [])
    return tuple(sorted({int(s["every"]) for s in sites if isinstance(s.get("every"), int) and s["every"] > 1}))


def periodic_work(
    fetch: Runs,
    host: Runs,
    epochs: Sequence[Epochs] | None = None,
    recorded: Sequence[WindowPeriodic | None] = (),
    hints: Sequence[int] = (),
) -> Periodic:
    """Work done every N steps, per run: the steps each run recorded as left out of its input efficiency, else
    those the same detector finds; their time beyond the other steps' median work."""
    steps_at: list[tuple[int, ...]] = []
    every: int | None = None
    reasons: list[str] = []
    extra_ms = total_ms = 0.0
    long_ms: list[float] = []
    for k, (f, h) in enumerate(zip(fetch, host)):
        work = work_of(f, h)
        found = recorded[k] if k < len(recorded) and recorded[k] is not None else None
        if found is None:
            found = window_periodic(work, epochs[k] if epochs is not None and k < len(epochs) else None, hints)
        total_ms += sum(h)
        if found.every is None:
            steps_at.append(())
            reasons.append(found.reason or "none found")
            continue
        every = every or found.every
        steps_at.append(found.steps)
        extra_ms += found.extra_ms
        long_ms += [work[i] for i in found.steps if i < len(work)]
    steps = sum(len(h) for h in host)
    if every is None:
        return Periodic(None, tuple(steps_at), reason=reasons[0] if reasons else "no window steps")
    return Periodic(
        every,
        tuple(steps_at),
        extra_ms_per_step=extra_ms / steps if steps else 0.0,
        share=extra_ms / total_ms if total_ms > 0 else 0.0,
        long_step_ms=statistics.median(long_ms) if long_ms else None,
    )


def steady_rounds(host: Runs, fetch: Runs, periodic: Periodic) -> list[list[float]]:
    """Each run's steady steps: the window's steps less the periodic work's extra time on the steps carrying it."""
    out = []
    for k, (h, f) in enumerate(zip(host, fetch)):
        marks = set(periodic.steps_at[k]) if k < len(periodic.steps_at) else set()
        work = work_of(f, h)
        others = sorted(w for i, w in enumerate(work) if i not in marks)
        median = others[len(others) // 2] if others else 0.0
        out.append([b - (w - median if i in marks else 0.0) for i, (b, w) in enumerate(zip(h, work))])
    return out


def ledger(
    fetch: Runs, host: Runs, sol: Runs, observed: Observed, device: str, periodic: Periodic | None = None
) -> Ledger:
    """Per step, in ms, parts that add up to the window's mean step, each between 0 and 100% of it.

    The wait for the batch and the periodic work are the window's own steps; the step's own work (the rest
    of each step) is split by ratios, never by subtracting figures taken under other conditions: the syncs'
    and copies' share of the observed steps, and compute as the cached-batch step when it fits in the
    window's own work. When it does not (those steps ran on a busier machine), compute is unavailable and
    the step's own work is one part.
    """
    step, wait = mean(host), mean(fetch)
    extra = periodic.extra_ms_per_step if periodic is not None and periodic.found else 0.0
    own = max(0.0, step - wait - extra)
    wall = observed.wall_ms
    sync_frac = min(1.0, observed.sync_ms / wall) if wall > 0 else 0.0
    copy_frac = min(1.0 - sync_frac, observed.copy_ms / wall) if wall > 0 else 0.0
    work = own * (1.0 - sync_frac - copy_frac)
    cpu = not device.startswith("cuda")
    notes: list[str] = []
    sol_values = [x for g in sol for x in g]
    compute: float | Unavailable
    if not sol_values:
        compute = Unavailable("no speed-of-light steps: compute is not told apart from the rest")
        notes.append(compute.reason)
    else:
        cached = statistics.median(sol_values) * (1.0 - sync_frac - copy_frac)
        if cached <= work * (1.0 + SOL_SLACK):
            compute = min(cached, work)
        else:
            compute = Unavailable(
                f"fed a cached batch the step took {cached:.3g} ms, more than the window's steps spent on their own "
                f"work ({work:.3g} ms): the two ran under different load, so one is not a part of the other"
            )
            notes.append(f"compute unavailable: {compute.reason}")
    if cpu:
        notes.append(
            "a CPU run has no device: nothing is copied to one, and a read to Python (.item(), .cpu()) waits for "
            "no queued work; its time is the op's own, which on a GPU would also wait for the queue to drain"
        )
    c = known(compute)
    if c is not None and work - c > 0.2 * step:
        notes.append(
            "the rest is what the window's steps spent beyond the same step fed a cached batch with the loader "
            "idle: waiting for a core (the loader's workers, other processes), the allocator, Python"
        )
    return Ledger(
        step_ms=step,
        wait_ms=wait,
        copy_ms=copy_frac * own,
        syncs_ms=sync_frac * own,
        work_ms=work,
        compute=compute,
        periodic_ms=extra,
        periodic_every=periodic.every if periodic is not None and extra > 0 else None,
        cpu=cpu,
        syncs_per_step=observed.syncs_per_step,
        sync_sites=dict(observed.sync_sites),
        periodic_syncs=observed.periodic_syncs,
        notes=tuple(notes),
    )


def cached_batch(host: Runs, sol: Runs, led: Ledger, periodic: Periodic, fetch: Runs) -> CachedBatch | Unavailable:
    """Fed a cached batch, the step takes X ms [CI]; the input costs the steady step less that, Y ms/step [CI]
    (periodic work left out: an evaluation is not the input's)."""
    import numpy as np

    if not any(sol) or not any(host):
        return Unavailable("no speed-of-light steps were run")
    if isinstance(led.compute, Unavailable):
        return led.compute
    steady = steady_rounds(host, fetch, periodic)
    x, x_lo, x_hi = two_level(sol, sol, lambda s, _: float(np.median(s)))
    cost, lo, hi = two_level(steady, sol, lambda h, s: float(h.mean() - np.median(s)))
    return CachedBatch(mean(steady), x, x_lo, x_hi, max(0.0, cost), max(0.0, lo), max(0.0, hi))


def efficiency(host: Runs, sol: Runs, led: Ledger, periodic: Periodic, fetch: Runs) -> Efficiency | Unavailable:
    """Input efficiency with its interval: the cached-batch step's median over the steady mean step (periodic work
    left out), never above 1; unavailable, with the reason, when the cached-batch steps ran on a busier machine."""
    import numpy as np

    if not any(sol):
        return Unavailable("no speed-of-light steps were run")
    if isinstance(led.compute, Unavailable):
        return led.compute
    steady = steady_rounds(host, fetch, periodic)

    def eff(h: np.ndarray, s: np.ndarray) -> float:
        m = float(h.mean())
        return min(1.0, float(np.median(s)) / m) if m > 0 else 0.0

    value, lo, hi = two_level(steady, sol, eff)
    return Efficiency(value, lo, hi, runs=sum(1 for h in host if h), periodic_left_out=periodic.found)
