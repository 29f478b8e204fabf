"""The doctor's intervals: the data-wait band's bootstrap, interleaved pairs' t-interval, the two-level bootstrap."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.harness.runner import INPUT_BANDS, input_band
from perfsuite.tools.doctor.model import CONFIDENCE, Measured, Unavailable, WaitBand

BOOTSTRAP = 2000


def mean(groups: Sequence[Sequence[float]]) -> float:
    values = [x for g in groups for x in g]
    return sum(values) / len(values) if values else 0.0


def wait_band(fetch_ms: Sequence[Sequence[float]], host_ms: Sequence[Sequence[float]]) -> WaitBand:
    """The window's data-wait share with its interval, and the band, called only when the interval clears its edges."""
    import numpy as np

    pairs = [list(zip(f, h)) for f, h in zip(fetch_ms, host_ms)]

    def share(groups: list[list[tuple[float, float]]]) -> float:
        fetched = sum(p[0] for g in groups for p in g)
        total = sum(p[1] for g in groups for p in g)
        return fetched / total if total > 0 else 0.0

    rng = np.random.default_rng(1)
    draws = [share([[g[i] for i in rng.integers(0, len(g), len(g))] for g in pairs if g]) for _ in range(BOOTSTRAP)]
    raw = [float(x) for x in np.percentile(draws, [(1 - CONFIDENCE) / 2 * 100, (1 + CONFIDENCE) / 2 * 100])]
    return banded(share(pairs), raw[0], raw[1], sum(len(g) for g in pairs))


def banded(share: float, low: float, high: float, steps: int, source: str = "data wait") -> WaitBand:
    """A wait share with its interval (clipped to [0, 1], saying so) and the band, called only when the interval
    clears its edges."""
    lo, hi = clip01(low), clip01(high)
    low_band, high_band = input_band(lo), input_band(hi)
    called = low_band == high_band
    edges = [limit for limit, _ in INPUT_BANDS if lo < limit <= hi]
    return WaitBand(
        share=clip01(share),
        low=lo,
        high=hi,
        band=low_band if called else None,
        between=None if called else f"{low_band} .. {high_band}",
        edge=edges[0] if edges else None,
        steps=steps,
        clipped=(lo, hi) != (low, high),
        source=source,
    )


def clip01(x: float) -> float:
    """A fraction's bound kept in [0, 1] (a bootstrap percentile of a ratio of sums can leave it)."""
    return min(1.0, max(0.0, x))


def ratio_interval(base: Sequence[float], head: Sequence[float], label: str) -> Measured | Unavailable:
    """Interleaved pairs of one figure (samples/s per run): the mean ratio head/base and its t-interval."""
    from scipy.stats import t as t_dist

    logs = [math.log(h / b) for b, h in zip(base, head) if b > 0 and h > 0]
    n = len(logs)
    if n == 0:
        return Unavailable("no pair of runs delivered samples")
    m = sum(logs) / n
    if n < 2:
        return Measured(math.exp(m), None, None, n, label)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    half = float(t_dist.ppf((1 + CONFIDENCE) / 2, n - 1)) * sd / math.sqrt(n)
    return Measured(math.exp(m), math.exp(m - half), math.exp(m + half), n, label)


def two_level(
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


def ci(lo: float | None, hi: float | None, fmt: str = ".3g", unit: str = "") -> str:
    if lo is None or hi is None:
        return ""
    return f" [{CONFIDENCE:.0%} CI {lo:{fmt}}{unit}..{hi:{fmt}}{unit}]"
