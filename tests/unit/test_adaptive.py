"""The adaptive A/B loop on synthetic samples: seeded and exact (no processes, no clock)."""

from __future__ import annotations

import math
import random

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.judge.adaptive import (
    ABOutcome,
    ABRule,
    AdaptiveAB,
    RunValues,
    decide,
    round_pairs,
    run_loop,
)


def _pairs(ds, base=10.0):
    return [(base, base * math.exp(d)) for d in ds]


def test_too_few_pairs_is_unknown_and_says_how_many_more():
    d = decide(_pairs([0.3, 0.3, 0.3]))
    assert d.outcome is ABOutcome.UNKNOWN
    assert d.more_pairs == 3 and "at least 6 pairs" in d.needs


def test_a_clear_slowdown_is_regressed():
    ds = [0.10, 0.11, 0.09, 0.12, 0.095, 0.105, 0.101, 0.115, 0.098, 0.102]
    d = decide(_pairs(ds))
    assert d.outcome is ABOutcome.REGRESSED
    assert d.p_slower == pytest.approx(1 / 2**10)  # exact signed-rank: every pair slower
    assert d.ratio == pytest.approx(math.exp(sum(ds) / len(ds)))


def test_nine_pairs_are_the_least_that_can_be_significant_at_0_002():
    assert decide(_pairs([0.2 + i / 100 for i in range(8)])).outcome is ABOutcome.UNKNOWN  # 1/256 > 0.002
    assert decide(_pairs([0.2 + i / 100 for i in range(9)])).outcome is ABOutcome.REGRESSED  # 1/512


def test_the_mirror_is_improved():
    ds = [-0.10, -0.11, -0.09, -0.12, -0.095, -0.105, -0.101, -0.115, -0.098, -0.102]
    assert decide(_pairs(ds)).outcome is ABOutcome.IMPROVED


def test_tight_pairs_around_one_are_same():
    ds = [0.01, -0.01, 0.005, -0.004, 0.0, 0.002, -0.003, 0.004]
    d = decide(_pairs(ds))
    assert d.outcome is ABOutcome.SAME and 0.95 < d.low < 1 < d.high < 1.05


def test_significant_but_below_the_factor_is_not_a_regression():
    ds = [0.03 + i / 1000 for i in range(12)]  # x1.035, every pair slower
    d = decide(_pairs(ds))
    assert d.outcome is ABOutcome.SAME  # inside the 5% margin


def test_noisy_pairs_are_unknown_with_what_would_decide():
    ds = [0.2, -0.15, 0.1, -0.05, 0.12, -0.2, 0.0, 0.18]
    d = decide(_pairs(ds))
    assert d.outcome is ABOutcome.UNKNOWN
    assert d.more_pairs is not None and d.more_pairs > 0
    assert d.needs.startswith(f"about {d.more_pairs} more pairs") and "same, once the interval fits" in d.needs


def test_bad_values_are_unknown():
    assert decide([(1.0, 0.0)] * 8).outcome is ABOutcome.UNKNOWN


def test_rule_validation():
    with pytest.raises(PerfsuiteError, match="above 1"):
        ABRule(factor=1.0)
    with pytest.raises(PerfsuiteError, match="alpha"):
        ABRule(alpha=0.7)


def test_round_pairs_follow_the_order():
    runs = [RunValues(1.0), RunValues(2.0), RunValues(3.0), RunValues(4.0)]
    assert [(b.value, h.value) for b, h in round_pairs("ABBA", runs)] == [(1.0, 2.0), (4.0, 3.0)]
    assert [(b.value, h.value) for b, h in round_pairs("BAAB", runs)] == [(2.0, 1.0), (3.0, 4.0)]
    assert [(b.value, h.value) for b, h in round_pairs("ABBA", [runs[0], None, runs[2], runs[3]])] == [(4.0, 3.0)]


def _synthetic(effects, sigma, seed, drift=0.1):
    """A measure() whose runs drift together per round (the machine) and differ by `effects[test]` for B."""
    rng = random.Random(seed)

    def measure(order, r):
        level = rng.gauss(0, drift)  # shared by the round's four runs
        out = {}
        for test, effect in effects.items():
            out[test] = [
                RunValues(10 * math.exp(level + rng.gauss(0, sigma) + (effect if side == "B" else 0))) for side in order
            ]
        return out

    return measure


def test_loop_is_seeded_and_exact():
    effects = {"slow": math.log(1.10), "same": 0.0}
    a = run_loop(_synthetic(effects, 0.04, seed=7), seed=3, max_rounds=20)
    b = run_loop(_synthetic(effects, 0.04, seed=7), seed=3, max_rounds=20)
    assert a.orders == b.orders
    assert {t: tr.decision for t, tr in a.tracks.items()} == {t: tr.decision for t, tr in b.tracks.items()}
    assert a.orders == ["ABBA", "ABBA", "BAAB", "BAAB", "ABBA"]
    assert a.tracks["slow"].decision.outcome is ABOutcome.REGRESSED and a.tracks["slow"].decided_at == 5
    assert a.tracks["same"].decision.outcome is ABOutcome.SAME and a.tracks["same"].decided_at == 3
    assert a.done()


def test_verdicts_freeze_at_their_first_decision():
    loop = AdaptiveAB(seed=0)
    same = [RunValues(10.0), RunValues(10.0 * 1.001), RunValues(10.0 * 0.999), RunValues(10.0)]
    for _ in range(3):
        loop.add_round("ABBA", {"t": same})
    first = loop.tracks["t"].decision
    assert first.outcome is ABOutcome.SAME and loop.tracks["t"].decided_at == 3
    loop.add_round("ABBA", {"t": [RunValues(10.0), RunValues(30.0), RunValues(30.0), RunValues(10.0)]})
    assert loop.tracks["t"].decision == first and len(loop.tracks["t"].pairs) == 8


def test_the_budget_stops_the_loop_with_unknown_left():
    rounds = []

    def keep_going(loop):
        rounds.append(len(loop.orders))
        return len(loop.orders) < 2

    loop = run_loop(_synthetic({"t": math.log(1.1)}, 0.05, seed=1), seed=0, keep_going=keep_going)
    assert len(loop.orders) == 2 and loop.pending() == ["t"]
    assert (
        loop.tracks["t"].decision.outcome is ABOutcome.UNKNOWN and "at least 6 pairs" in loop.tracks["t"].decision.needs
    )


def test_max_rounds_bounds_an_undecidable_test():
    loop = run_loop(_synthetic({"t": math.log(1.04)}, 0.3, seed=2), seed=0, max_rounds=6)
    assert len(loop.orders) == 6 and loop.tracks["t"].decision.outcome is ABOutcome.UNKNOWN
    assert loop.tracks["t"].decision.pairs == 12


def test_a_a_false_alarms_stay_rare_on_synthetic_drift():
    """Exact count on fixed seeds: 200 synthetic A/A comparisons with round-to-round drift, 1 regressed (0.5%)."""
    regressed = sum(
        run_loop(_synthetic({"t": 0.0}, 0.07, seed=s), seed=s, max_rounds=12).tracks["t"].decision.outcome
        is ABOutcome.REGRESSED
        for s in range(200)
    )
    assert regressed == 1
