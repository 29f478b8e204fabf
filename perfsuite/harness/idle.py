"""The GPU's own idle time between steps, from the device's clock: what starvation means on an asynchronous device.

On a GPU the host's wait in ``next(loader)`` is not the GPU's idle time: the host queues a step's kernels and asks
for the next batch while the GPU still runs them, so the two overlap. What the GPU waited is told by its own clock.
At each window step's request for its batch the driver records a CUDA event (the step clock's mark), and another
once the batch is in hand (:attr:`perfsuite.harness.driver.Driver.ready`). An event completes when the stream
reaches it, so the first one's time is when the GPU ran out of the previous step's work (or the request, if that
came later), and the second one's is the later of that and the batch's arrival: nothing is queued between them,
so the time from one to the other is exactly the time the GPU had no work because the batch was not there. Two
events per step and no synchronisation: the window runs what it ran before (tests/unit/test_gpu_idle.py).

On a CPU the device is the host, which runs each step as it is called: the same marks on the host clock read the
host's wait, so ``gpu_idle_frac`` is unavailable there, and ``data_wait_frac`` is the figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import WindowTimings

NAME = "gpu_idle_frac"
# NVML's utilisation and this idle time disagree beyond sampling error when |NVML - (1 - idle)| exceeds this floor
# plus twice NVML's standard error: NVML reads kernel-active time over its own sample periods (1/6 s to 1 s), which do
# not line up with the window's edges, and counts the gaps between one step's kernels as idle, which this does not.
NVML_FLOOR = 0.10
BOOTSTRAP = 2000
CONFIDENCE = 0.95


def gpu_idle(t: WindowTimings) -> Metric:
    """``gpu_idle_frac``: the share of the window's device time the GPU had no work because the batch was not there,
    with a 95% interval over steps (bootstrap, clipped to [0, 1]) and the per-step idle ms."""
    if t.device_clock != "cuda-events":
        return Metric.unavailable(
            NAME,
            "device=cpu: a CPU run computes on the host, which waits for each batch itself (data_wait_frac)",
            "fraction",
        )
    idle, steps = list(t.idle_ms), list(t.step_ms)
    if not idle or len(idle) != len(steps) or sum(steps) <= 0:
        return Metric.unavailable(NAME, "the window's device marks do not pair with its steps", "fraction")
    idle = [min(max(0.0, i), s) for i, s in zip(idle, steps)]  # an event pair's rounding never leaves the step
    frac = sum(idle) / sum(steps)
    low, high = _interval(idle, steps)
    return Metric(
        NAME,
        frac,
        "fraction",
        detail={
            "interval": [low, high],
            "confidence": CONFIDENCE,
            "idle_ms_per_step": sum(idle) / len(idle),
            "idle_ms_max": max(idle),
            "steps": len(idle),
            "clock": "CUDA events at each step's request for its batch and once it was in hand",
        },
    )


def _interval(idle: Sequence[float], steps: Sequence[float]) -> tuple[float, float]:
    """A percentile bootstrap of the ratio of sums over steps (fixed seed: the same Result gives the same interval)."""
    import numpy as np

    i, s = np.asarray(idle, dtype=float), np.asarray(steps, dtype=float)
    if len(i) < 3:
        return 0.0, 1.0
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(i), size=(BOOTSTRAP, len(i)))
    ratios = i[picks].sum(axis=1) / np.maximum(s[picks].sum(axis=1), 1e-12)
    tail = (1.0 - CONFIDENCE) / 2
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return max(0.0, float(low)), min(1.0, float(high))


def against_nvml(idle: Metric, util: Metric | None, util_samples: Sequence[float] = ()) -> tuple[Metric, str | None]:
    """The idle metric with NVML's reading beside it, and a note when the two contradict beyond sampling error."""
    if not isinstance(idle.value, (int, float)) or util is None or not isinstance(util.value, (int, float)):
        return idle, None
    idle_frac, nvml = float(idle.value), float(util.value)
    busy = 1.0 - idle_frac
    xs = [float(x) for x in util_samples if isinstance(x, (int, float))]
    se = (
        (math.sqrt(sum((x - sum(xs) / len(xs)) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs)))
        if len(xs) > 1
        else 0.0
    )
    tolerance = NVML_FLOOR + 2 * se
    gap = nvml - busy
    agrees = abs(gap) <= tolerance
    detail: dict[str, Any] = {
        **idle.detail,
        "nvml_gpu_util": nvml,
        "busy": busy,
        "nvml_tolerance": tolerance,
        "nvml_agrees": agrees,
    }
    checked = Metric(idle.name, idle.value, idle.unit, idle.reason, detail)
    if agrees:
        return checked, None
    return checked, (
        f"the GPU's own clock read it busy {busy:.0%} of the window (idle {idle_frac:.0%} between steps) while "
        f"NVML read {nvml:.0%} kernel-active, {abs(gap):.0%} apart, beyond the {tolerance:.0%} their "
        "sampling allows: "
        + (
            "NVML counts gaps between one step's kernels as idle (a step bound by its host's launches or syncs)"
            if gap < 0
            else "NVML's sample periods reached beyond the window, or another process used the GPU"
        )
    )


# A GPU kept busy whose SMs are half idle is fed, and its next gain is in the step: NVML's kernel-active time at or
# above BUSY with GPM's SM use below SM_LOW (on an H200, the fix read 97% busy and 53% of SMs at batch 32 in bf16).
BUSY = 0.9
SM_LOW = 0.6


def underused_sms(util: Metric | None, sm: Metric | None) -> str | None:
    """A note when the GPU is busy but its SMs are not: small kernels, and what makes them larger."""
    if util is None or sm is None or not isinstance(util.value, (int, float)) or not isinstance(sm.value, (int, float)):
        return None
    if util.value < BUSY or sm.value >= SM_LOW:
        return None
    return (
        f"the GPU was busy {util.value:.0%} of the window (NVML) but its SMs only {sm.value:.0%} used (GPM): it is "
        "fed, and its kernels are small for it; a larger batch, torch.compile (fewer, fused kernels) or "
        "channels_last (faster convolutions) would use more of it"
    )
