"""The statistics behind timing verdicts: Mann-Whitney U and a bootstrap ratio interval.

Pure functions on sequences of floats. Mann-Whitney is scipy's
(``scipy.stats.mannwhitneyu``, imported on first use so ``perfsuite compare``
starts fast): exact at small n, where a normal approximation loses power
(at n = 5-6 per side, scipy's exact test is significant at alpha = 0.01 in
4-5% of random comparisons where the hand-written asymptotic test that
preceded it was not; never the other way round: scripts/mwu_exact_vs_asymptotic.py).
Step times are skewed and carry outliers (GC, a busy neighbour), so both
tools are rank- or median-based rather than assuming normal samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Alternative = Literal["two-sided", "greater", "less"]
_ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class MannWhitney:
    """U of the first sample (as scipy reports it), and the p-value for ``alternative``."""

    u: float
    p_value: float
    alternative: str


@dataclass(frozen=True)
class RatioInterval:
    """A bootstrap interval for median(head) / median(base).

    The bounds are kept as logs too: verdicts decide in log space, where
    swapping base and head negates every number exactly, so the decision is
    exactly symmetric (``1/(a/b)`` and ``b/a`` can differ in the last bit).
    """

    log_low: float
    log_high: float
    confidence: float

    @property
    def low(self) -> float:
        return math.exp(self.log_low)

    @property
    def high(self) -> float:
        return math.exp(self.log_high)


def _as_array(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds NaN or infinite values; drop them before comparing")
    return arr


EXACT_MAX_N = 50  # exact null distribution up to 50 samples a side (milliseconds); normal approximation above


def mann_whitney_u(x: Sequence[float], y: Sequence[float], alternative: Alternative = "two-sided") -> MannWhitney:
    """Mann-Whitney U test of x against y: ``scipy.stats.mannwhitneyu``.

    ``alternative="greater"`` asks whether x tends to be larger than y (for
    step times: x slower). The method: ``exact`` when there are no ties and
    both sides hold at most :data:`EXACT_MAX_N` samples; otherwise the normal
    approximation with tie and continuity correction (``asymptotic``), which
    is what scipy's ``auto`` picks there too. Where every value is tied there
    is no evidence either way and the p-value is 1 (scipy gives NaN).
    """
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r}; write one of {', '.join(_ALTERNATIVES)}")
    a, b = _as_array(x, "x"), _as_array(y, "y")
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError(f"Mann-Whitney needs samples on both sides, got {n1} and {n2}")
    from scipy.stats import mannwhitneyu

    both = np.concatenate([a, b])
    tied = len(np.unique(both)) < len(both)
    if len(np.unique(both)) == 1:
        return MannWhitney(u=n1 * n2 / 2.0, p_value=1.0, alternative=alternative)
    method = "exact" if not tied and max(n1, n2) <= EXACT_MAX_N else "asymptotic"
    res = mannwhitneyu(a, b, alternative=alternative, method=method, use_continuity=True)
    p = float(res.pvalue)
    return MannWhitney(u=float(res.statistic), p_value=1.0 if math.isnan(p) else min(1.0, p), alternative=alternative)


def _content_order(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``a`` should draw its resamples first.

    The order depends on the samples, not on which argument is base, so a
    swapped comparison reuses the very same resamples (exact symmetry) and
    scaling both sets by one constant keeps the order (unit invariance).
    """
    if len(a) != len(b):
        return len(a) < len(b)
    return a.tolist() <= b.tolist()  # both sorted: lexicographic order of the values


def _bootstrap_medians(sorted_values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of resamples. The values are sorted, so sorted indices give the order statistics
    directly: sorting small ints is several times faster than ``np.median`` on the floats."""
    n = len(sorted_values)
    idx = np.sort(rng.integers(0, n, size=(resamples, n)), axis=1)
    return (sorted_values[idx[:, (n - 1) // 2]] + sorted_values[idx[:, n // 2]]) / 2.0


def bootstrap_ratio_ci(
    base: Sequence[float],
    head: Sequence[float],
    confidence: float = 0.99,
    resamples: int = 4000,
    seed: int = 0,
) -> RatioInterval:
    """Percentile bootstrap interval of median(head) / median(base), both resampled independently.

    Seeded, so a verdict is reproducible; the seed also mixes in the sample
    sizes so comparisons of different shapes do not share resamples. Needs
    positive samples (a ratio of times).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} must lie strictly between 0 and 1, e.g. 0.99")
    if resamples < 100:
        raise ValueError(f"resamples={resamples} is too few for a percentile interval; use 1000 or more")
    a, b = _as_array(base, "base"), _as_array(head, "head")
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"bootstrap needs samples on both sides, got {len(a)} and {len(b)}")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("a ratio of medians needs positive samples; got zero or negative values")
    a, b = np.sort(a), np.sort(b)
    rng = np.random.default_rng([seed, len(a), len(b)] if len(a) <= len(b) else [seed, len(b), len(a)])
    if _content_order(a, b):
        med_a = _bootstrap_medians(a, rng, resamples)
        med_b = _bootstrap_medians(b, rng, resamples)
    else:
        med_b = _bootstrap_medians(b, rng, resamples)
        med_a = _bootstrap_medians(a, rng, resamples)
    log_ratios = np.sort(np.log(med_b) - np.log(med_a))
    # Order statistics, not interpolation: negating the ratios mirrors them exactly.
    k = int(math.floor((1.0 - confidence) / 2.0 * resamples))
    return RatioInterval(float(log_ratios[k]), float(log_ratios[resamples - 1 - k]), confidence)


def wilcoxon_signed_rank(differences: Sequence[float], alternative: Alternative = "greater") -> float:
    """One-sample Wilcoxon signed-rank p-value of paired differences (``scipy.stats.wilcoxon``).

    ``alternative="greater"``: the differences tend to be positive (head slower). Zero differences are
    dropped (``zero_method="wilcox"``); where none is left there is no evidence either way and p is 1.
    scipy picks the exact null distribution for small samples without ties.
    """
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r}; write one of {', '.join(_ALTERNATIVES)}")
    d = _as_array(differences, "differences")
    if not np.any(d != 0.0):
        return 1.0
    from scipy.stats import wilcoxon

    p = float(wilcoxon(d, alternative=alternative, zero_method="wilcox").pvalue)
    return 1.0 if math.isnan(p) else min(1.0, p)


def sign_interval(values: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """Distribution-free interval for the median: the order statistics the sign test puts at ``confidence``.

    The (k+1)-th smallest and (k+1)-th largest value, for the largest k with P(Binomial(n, 1/2) <= k) <=
    (1 - confidence) / 2: the interval then covers the median with at least ``confidence``. Exact, needs no
    resampling, and negating the values mirrors it exactly. None when n is too small for that confidence (at
    99%: fewer than 8 values).
    """
    x = np.sort(_as_array(values, "values"))
    k = sign_rank(len(x), confidence)
    return None if k < 0 else (float(x[k]), float(x[len(x) - 1 - k]))


def sign_rank(n: int, confidence: float) -> int:
    """The largest k with P(Binomial(n, 1/2) <= k) <= (1 - confidence) / 2 (-1 when there is none): the
    0-based index of :func:`sign_interval`'s lower bound among n sorted values."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} must lie strictly between 0 and 1, e.g. 0.99")
    from scipy.stats import binom

    tail = (1.0 - confidence) / 2.0
    k = int(binom.ppf(tail, n, 0.5))  # the smallest k with P(X <= k) >= tail, so one step down at most
    return k - 1 if binom.cdf(k, n, 0.5) > tail else k


def median(values: Sequence[float]) -> float:
    return float(np.median(_as_array(values, "values")))
