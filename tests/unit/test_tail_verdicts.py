"""The step-time tail is judged: p99 and stalls relative to each run's median, max never alone."""

from __future__ import annotations

import math

import pytest

from perfsuite.judge.tails import compare_tail, exceedance_p
from perfsuite.judge.verdict import Outcome


def _steady(n=60, level=10.0):
    return [level * (1 + 0.02 * ((i * 7) % 11 - 5) / 5) for i in range(n)]


def _hiccup(every, n=60, level=10.0, size=8.0):
    return [x * (size if i % every == every - 1 else 1.0) for i, x in enumerate(_steady(n, level))]


def test_exceedance_p_is_the_chance_the_top_k_all_fall_in_head():
    assert exceedance_p([1.0, 2.0, 3.0], [4.0, 5.0, 0.5]) == (2, math.comb(3, 2) / math.comb(6, 2))
    assert exceedance_p([1.0, 9.0], [2.0, 3.0]) == (0, 1.0)


def test_a_periodic_hiccup_is_regressed_in_p99_and_stalls():
    base, head = _steady(), _hiccup(every=8)  # 7 stalls in 60 steps
    assert compare_tail("stalls", base, head, 2.0).outcome is Outcome.REGRESSED
    assert compare_tail("step_ms_p99", base, head, 1.5).outcome is Outcome.REGRESSED
    assert compare_tail("step_ms_p99", head, base, 1.5).outcome is Outcome.IMPROVED


def test_a_uniformly_slower_run_has_the_same_tail():
    base = _steady()
    head = [2 * x for x in base]  # a busy machine, or a slowdown step_ms judges
    for metric, factor in (("step_ms_p99", 1.5), ("step_ms_max", 2.0), ("stalls", 2.0)):
        assert compare_tail(metric, base, head, factor).outcome is Outcome.UNCHANGED


def test_one_slow_step_is_never_more_than_inconclusive():
    base, head = _steady(), _steady()
    head[30] *= 20  # a recompile stall: recompiles is the exact check
    assert compare_tail("step_ms_max", base, head, 2.0).outcome is Outcome.INCONCLUSIVE
    assert compare_tail("stalls", base, head, 2.0).outcome is Outcome.UNCHANGED  # 0 -> 1
    assert compare_tail("step_ms_p99", base, head, 1.5).outcome is Outcome.INCONCLUSIVE  # one step beyond: not certain


def test_too_few_samples_is_inconclusive():
    assert compare_tail("stalls", [1.0] * 3, [1.0] * 3, 2.0).outcome is Outcome.INCONCLUSIVE


def test_a_few_stalls_in_a_short_run_are_inconclusive():
    base, head = _steady(12), _hiccup(every=6, n=12)  # 2 stalls in 12 steps
    t = compare_tail("stalls", base, head, 2.0)
    assert t.outcome is Outcome.INCONCLUSIVE and "perfsuite ab" in t.reason
    assert (t.base_median, t.head_median) == pytest.approx((0.0, 2.0))
