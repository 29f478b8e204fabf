"""Step-by-step timing (judge.timing.compare_paired): two runs of one job, the i-th step against the i-th.

The shape these tests plant is the one the contention study found in every smoke job: an epoch start every
third step that takes 4-5x the median (the workers start), so two bags of steps cannot see a 30% slower step.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from fixed_fingerprint import FP
from scipy.stats import binom

from perfsuite.core import metrics as registry
from perfsuite.core.results import Metric, Result
from perfsuite.judge.engine import compare_results, judge_metric
from perfsuite.judge.stats import sign_interval, wilcoxon_signed_rank
from perfsuite.judge.timing import can_pair, compare_paired, compare_timing
from perfsuite.judge.verdict import Outcome


def make_result(step_ms: list[float]) -> Result:
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={"step_ms": Metric("step_ms", float(np.median(step_ms)), "ms")},
        samples={"step_ms": list(step_ms)},
        fingerprint=FP,
        batch_size=8,
        steps=len(step_ms),
        warmup=0,
    )


def epochs(level: float, n: int = 12, seed: int = 0, spread: float = 0.03, start: float = 4.5) -> list[float]:
    """Step times with an epoch start (``start`` x the level) every third step, lognormal noise on each."""
    rng = np.random.default_rng(seed)
    return [level * (start if i % 3 == 1 else 1.0) * float(rng.lognormal(0.0, spread)) for i in range(n)]


def slowed(steps: list[float], extra_ms: float) -> list[float]:
    return [x + extra_ms for x in steps]


def test_a_30_percent_slower_step_is_seen_step_by_step_and_not_as_two_bags():
    base, head = epochs(20.0, seed=1), slowed(epochs(20.0, seed=2), 6.0)  # +6 ms on a 20 ms step
    assert compare_timing(base, head).outcome is not Outcome.REGRESSED  # the epoch starts swamp it
    t = compare_paired(base, head)
    assert t.outcome is Outcome.REGRESSED and t.paired
    assert t.ratio == pytest.approx(1.3, abs=0.05)  # +6 ms on 8 of 12 steps of 20 ms: x1.3 on the median step
    assert t.interval.low > 1.0


@pytest.mark.parametrize("seed", range(20))
def test_identical_runs_never_fail(seed):
    t = compare_paired(epochs(20.0, seed=2 * seed), epochs(20.0, seed=2 * seed + 1))
    assert t.outcome in (Outcome.UNCHANGED, Outcome.INCONCLUSIVE)


def test_a_faster_head_improves():
    base, head = epochs(20.0, seed=3), [x * 0.7 for x in epochs(20.0, seed=4)]
    assert compare_paired(base, head).outcome is Outcome.IMPROVED


def test_swapping_the_runs_mirrors_the_verdict_exactly():
    a, b = epochs(20.0, seed=5), slowed(epochs(20.0, seed=6), 5.0)
    forward, backward = compare_paired(a, b), compare_paired(b, a)
    assert forward.outcome is Outcome.REGRESSED and backward.outcome is Outcome.IMPROVED
    assert forward.log_ratio == -backward.log_ratio
    assert (forward.interval.log_low, forward.interval.log_high) == (
        -backward.interval.log_high,
        -backward.interval.log_low,
    )


def test_a_burst_of_contention_in_one_part_of_one_run_is_not_a_regression():
    base = epochs(20.0, 30, seed=7)
    head = epochs(20.0, 30, seed=8)
    head = head[:10] + [x * 1.4 for x in head[10:20]] + head[20:]  # a neighbour's build in the middle third
    t = compare_paired(base, head, factor=1.05)
    assert t.outcome is not Outcome.REGRESSED


def test_below_the_factor_is_not_a_regression_however_significant():
    base = epochs(20.0, 60, seed=9, spread=0.002)
    t = compare_paired(base, [x * 1.03 for x in base])
    assert t.p_slower < 1e-6 and t.outcome is Outcome.UNCHANGED


def test_the_factor_is_the_rules_setting():
    base, head = epochs(20.0, 30, seed=10), [x * 1.12 for x in epochs(20.0, 30, seed=11)]
    assert compare_paired(base, head, factor=1.05).outcome is Outcome.REGRESSED
    assert compare_paired(base, head, factor=1.2).outcome is not Outcome.REGRESSED


@pytest.mark.parametrize(
    "base,head,why",
    [
        ([10.0] * 12, [10.0] * 11, "as many steps a side"),
        ([10.0] * 7, [12.0] * 7, "too few steps to pair (7)"),
        ([10.0] * 11 + [0.0], [10.0] * 12, "positive times"),
    ],
)
def test_what_cannot_be_paired_is_inconclusive_with_the_reason(base, head, why):
    t = compare_paired(base, head)
    assert t.outcome is Outcome.INCONCLUSIVE and why in t.reason


def test_can_pair_needs_equal_lengths_and_enough_steps_for_the_interval():
    assert can_pair([1.0] * 12, [1.0] * 12)
    assert not can_pair([1.0] * 12, [1.0] * 13)
    assert not can_pair([1.0] * 7, [1.0] * 7)  # at 99% the sign test needs 8
    assert can_pair([1.0] * 6, [1.0] * 6, alpha=0.05)


@pytest.mark.parametrize("n", [8, 9, 12, 20, 31, 50])
def test_sign_interval_is_the_order_statistics_the_binomial_gives(n):
    values = [float(i) for i in range(n)]
    low, high = sign_interval(values, 0.99)
    k = int(low)  # values are 0..n-1, so the bound is its own 0-based index: the (k+1)-th smallest
    assert binom.cdf(k, n, 0.5) <= 0.005 < binom.cdf(k + 1, n, 0.5)  # the largest k that keeps the tail
    assert high == n - 1 - k
    assert sign_interval([-v for v in values], 0.99) == (-high, -low)


def test_sign_interval_refuses_a_bad_confidence_and_needs_enough_values():
    assert sign_interval([1.0] * 7, 0.99) is None
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        sign_interval([1.0] * 12, 1.0)


def test_signed_rank_sees_direction_and_gives_1_without_evidence():
    assert wilcoxon_signed_rank([0.1] * 10, "greater") < 0.01
    assert wilcoxon_signed_rank([0.1] * 10, "less") > 0.5
    assert wilcoxon_signed_rank([0.0] * 10, "greater") == 1.0


# ----------------------------------------------------------------------------- through the engine


def test_step_ms_is_judged_step_by_step_between_runs_of_one_shape():
    base, head = make_result(epochs(20.0, seed=12)), make_result(slowed(epochs(20.0, seed=13), 6.0))
    (v,) = [v for v in compare_results(base, head, "t", runs_needed=1) if v.metric == "step_ms"]
    assert v.outcome is Outcome.REGRESSED and "step by step" in v.message
    assert math.isclose(v.ratio, compare_paired(base.samples["step_ms"], head.samples["step_ms"]).ratio)


def test_runs_of_different_lengths_or_batch_sizes_are_judged_as_two_bags():
    base = make_result(epochs(20.0, 12, seed=14))
    longer = make_result(slowed(epochs(20.0, 15, seed=15), 6.0))
    v = judge_metric(registry.get("step_ms"), base, longer, "t")
    assert "step by step" not in v.message
    other_batch = dataclasses.replace(make_result(slowed(epochs(20.0, 12, seed=15), 6.0)), batch_size=16)
    v = judge_metric(registry.get("step_ms"), base, other_batch, "t")
    assert "step by step" not in v.message and "per sample" in v.message


def test_only_declared_step_ordered_metrics_pair():
    paired = {s.name for s in registry.all_specs() if s.step_order}
    assert paired == {"step_ms"}  # step_cpu_ms pairs worse: its between-run shifts become significant
    with pytest.raises(Exception, match="step_order pairs"):
        registry.MetricSpec("x", "ms", "noisy", "lower", "f", "p", step_order=True)
