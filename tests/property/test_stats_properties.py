"""Properties of the timing verdict: self, scale, units, symmetry."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from perfsuite.judge.stats import bootstrap_ratio_ci, mann_whitney_u
from perfsuite.judge.timing import compare_timing
from perfsuite.judge.verdict import DEFAULT_FACTOR, Outcome

SETTINGS = settings(max_examples=60, deadline=None)
MIRROR = {Outcome.REGRESSED: Outcome.IMPROVED, Outcome.IMPROVED: Outcome.REGRESSED}


@st.composite
def step_times(draw, min_size=5, max_size=40, spread=0.3):
    """Step times on a 0.01 ms grid around a level, as a timer would report them."""
    level = draw(st.integers(200, 5000))
    n = draw(st.integers(min_size, max_size))
    jitter = st.integers(-int(level * spread), int(level * spread))
    return [(level + draw(jitter)) / 100 for _ in range(n)]


@st.composite
def comparisons(draw):
    """A base run and a head run at a drawn speed ratio (often near 1, sometimes far)."""
    base = draw(step_times())
    shift = draw(st.sampled_from([1.0, 1.0, 1.03, 1.1, 1.5, 0.7]))
    head = [round(x * shift * (1 + draw(st.integers(-5, 5)) / 100), 2) for x in draw(step_times())]
    return base, [max(h, 0.01) for h in head]


@SETTINGS
@given(step_times())
def test_comparing_with_itself_never_moves(samples):
    assert compare_timing(samples, samples).outcome not in (Outcome.REGRESSED, Outcome.IMPROVED)
    assert mann_whitney_u(samples, samples, "greater").p_value >= 0.5


@SETTINGS
@given(step_times(min_size=20, spread=0.02), step_times(min_size=20, spread=0.02), st.floats(1.5, 3.0))
def test_scaling_past_the_factor_is_detected(base, other, scale):
    head = [x / sorted(other)[len(other) // 2] * sorted(base)[len(base) // 2] * scale for x in other]
    assert compare_timing(base, head).outcome is Outcome.REGRESSED
    assert compare_timing(head, base).outcome is Outcome.IMPROVED


@SETTINGS
@given(comparisons(), st.integers(-12, 12))
def test_units_do_not_change_the_verdict_power_of_two(pair, exponent):
    base, head = pair
    c = 2.0**exponent  # exact in binary floating point: nothing may change at all
    original = compare_timing(base, head)
    scaled = compare_timing([x * c for x in base], [x * c for x in head])
    assert scaled.outcome is original.outcome and scaled.p_slower == original.p_slower


@SETTINGS
@given(comparisons(), st.sampled_from([1e-3, 1e3, 60.0]))
def test_units_do_not_change_the_verdict_ms_to_s(pair, c):
    base, head = pair
    original = compare_timing(base, head)
    if original.interval is not None:  # away from a boundary, where the last bit could tip it
        edges = (0.0, math.log(DEFAULT_FACTOR), -math.log(DEFAULT_FACTOR))
        values = (original.log_ratio, original.interval.log_low, original.interval.log_high)
        assume(all(abs(v - e) > 1e-9 for v in values for e in edges))
    assert compare_timing([x * c for x in base], [x * c for x in head]).outcome is original.outcome


@SETTINGS
@given(comparisons())
def test_swapping_base_and_head_mirrors_the_verdict(pair):
    base, head = pair
    forward, backward = compare_timing(base, head), compare_timing(head, base)
    assert backward.outcome is MIRROR.get(forward.outcome, forward.outcome)
    assert mann_whitney_u(head, base, "greater").p_value == mann_whitney_u(base, head, "less").p_value


@SETTINGS
@given(comparisons())
def test_interval_is_ordered_and_contains_nothing_impossible(pair):
    base, head = pair
    ci = bootstrap_ratio_ci(base, head)
    assert ci.log_low <= ci.log_high
    slack = 1e-12  # exp(log(a) - log(b)) and a / b differ in the last bits
    assert math.log(min(head)) - math.log(max(base)) - slack <= ci.log_low
    assert ci.log_high <= math.log(max(head)) - math.log(min(base)) + slack
