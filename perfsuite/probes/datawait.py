"""data_wait_frac: how much of the measured window the loop spent waiting for its next batch.

This is the seeds' "the GPU waits for the CPU": when workers cannot keep up,
``next(loader)`` blocks and the device idles. The runner already times each
``next()`` call in the window (WindowTimings.fetch_s), so this probe adds no
instrumentation of its own and works on any device.
"""

from __future__ import annotations

import statistics

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, WindowTimings


class DataWaitProbe(Probe):
    """Fraction of the window's wall time blocked in ``next(loader)``, and the epoch-start fetches.

    Verdicts judge both on their raw samples (``Result.samples``: ``data_wait``,
    each step's share of time spent fetching, and ``epoch_fetch_ms``); the
    summary values here are for people and thresholds.
    """

    name = "datawait"

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        if not timings.fetch_s or timings.wall_s <= 0:
            why = "the runner recorded no batch fetch times in the window"
            return [Metric.unavailable("data_wait_frac", why), Metric.unavailable("epoch_fetch_ms", why)]
        wait_s = sum(timings.fetch_s)
        fetch_ms = sorted(s * 1e3 for s in timings.fetch_s)
        frac = min(1.0, max(0.0, wait_s / timings.wall_s))
        epoch = Metric.unavailable("epoch_fetch_ms", "no epoch started inside the measured window", "ms")
        if timings.epoch_fetch_ms:
            epoch = Metric(
                "epoch_fetch_ms",
                statistics.median(timings.epoch_fetch_ms),
                "ms",
                detail={"epochs_started": len(timings.epoch_fetch_ms)},
            )
        return [
            epoch,
            Metric(
                "data_wait_frac",
                frac,
                "fraction",
                detail={
                    "wait_s": wait_s,
                    "wall_s": timings.wall_s,
                    "fetch_ms_median": statistics.median(fetch_ms),
                    "fetch_ms_max": fetch_ms[-1],
                    "epochs_started": timings.epochs_started,
                },
            ),
        ]
