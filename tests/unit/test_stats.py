"""Mann-Whitney U against scipy (the oracle), and the bootstrap ratio interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from perfsuite.judge.stats import bootstrap_ratio_ci, mann_whitney_u, median

ALTERNATIVES = ("two-sided", "greater", "less")


def _cases():
    rng = np.random.default_rng(3)
    yield "normal-shift", rng.normal(10, 1, 30), rng.normal(10.8, 1, 30)
    yield "unequal-n", rng.lognormal(2, 0.2, 8), rng.lognormal(2.1, 0.2, 25)
    yield "heavy-ties", rng.integers(0, 4, 20).astype(float), rng.integers(1, 5, 15).astype(float)
    yield "identical", np.arange(12.0), np.arange(12.0)
    yield "separated", np.arange(10.0), np.arange(10.0) + 100


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("name,x,y", list(_cases()), ids=[c[0] for c in _cases()])
def test_mann_whitney_is_scipys(name, x, y, alternative):
    ours = mann_whitney_u(x, y, alternative)
    tied = len(np.unique(np.concatenate([x, y]))) < len(x) + len(y)
    method = "asymptotic" if tied or max(len(x), len(y)) > 50 else "exact"
    ref = scipy_stats.mannwhitneyu(x, y, alternative=alternative, method=method, use_continuity=True)
    assert ours.u == pytest.approx(ref.statistic)
    assert ours.p_value == pytest.approx(min(1.0, ref.pvalue), rel=1e-12, abs=1e-15)


def test_mann_whitney_is_exact_at_small_n():
    """Five against five, fully separated: the exact one-sided p is 1/C(10,5) = 1/252, significant at 0.01
    (the normal approximation says 0.006 with continuity; at four a side it is 1/70 against 0.015)."""
    assert mann_whitney_u([2.0, 3, 4, 5, 6], [1.0, 1.1, 1.2, 1.3, 1.4], "greater").p_value == pytest.approx(1 / 252)
    assert mann_whitney_u([2.0, 3, 4, 5], [1.0, 1.1, 1.2, 1.3], "greater").p_value == pytest.approx(1 / 70)


def test_mann_whitney_ties_use_the_corrected_normal_approximation():
    x, y = [1.0, 1, 2, 3, 3, 4], [2.0, 2, 4, 5, 5, 6]
    ref = scipy_stats.mannwhitneyu(x, y, alternative="less", method="asymptotic", use_continuity=True).pvalue
    assert mann_whitney_u(x, y, "less").p_value == pytest.approx(ref, rel=1e-12)


def test_all_tied_is_no_evidence():
    assert mann_whitney_u([5.0] * 6, [5.0] * 9, "greater").p_value == 1.0


@pytest.mark.parametrize(
    "x,y,alternative,match",
    [
        ([1.0], [], "greater", "both sides"),
        ([1.0, float("nan")], [2.0], "greater", "NaN"),
        ([1.0], [2.0], "bigger", "two-sided, greater, less"),
    ],
    ids=["empty", "nan", "bad-alternative"],
)
def test_mann_whitney_rejects_bad_input(x, y, alternative, match):
    with pytest.raises(ValueError, match=match):
        mann_whitney_u(x, y, alternative)


def test_bootstrap_covers_the_true_ratio_and_is_reproducible():
    rng = np.random.default_rng(5)
    base = 10 * rng.lognormal(0, 0.05, 40)
    head = 12 * rng.lognormal(0, 0.05, 40)
    ci = bootstrap_ratio_ci(base, head)
    assert ci.low < 1.2 < ci.high
    assert ci.low > 1.1 and ci.high < 1.3
    assert bootstrap_ratio_ci(base, head) == ci


def test_bootstrap_swapped_is_exact_mirror():
    rng = np.random.default_rng(9)
    a, b = rng.lognormal(0, 0.1, 25), rng.lognormal(0.05, 0.1, 30)
    forward, backward = bootstrap_ratio_ci(a, b), bootstrap_ratio_ci(b, a)
    assert (forward.log_low, forward.log_high) == (-backward.log_high, -backward.log_low)


def test_bootstrap_needs_positive_samples():
    with pytest.raises(ValueError, match="positive"):
        bootstrap_ratio_ci([1.0, 0.0, 2.0], [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"confidence": 1.0}, "between 0 and 1"),
        ({"resamples": 10}, "too few"),
    ],
    ids=["confidence", "resamples"],
)
def test_bootstrap_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_ratio_ci([1.0, 2.0], [1.0, 2.0], **kwargs)


def test_median_even_and_odd():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert math.isclose(median([1e-3] * 4), 1e-3)
