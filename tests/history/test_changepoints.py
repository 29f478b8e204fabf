"""Change points on synthetic histories with known steps: every exact step found, none invented; PELT on
noisy series with false and missed steps counted over many seeded series."""

from __future__ import annotations

import numpy as np

from perfsuite.tools.history.changepoints import exact_steps, noisy_steps, pelt


def test_every_change_of_an_exact_counter_is_a_step_and_gaps_are_skipped():
    assert exact_steps([1, 1, 2, 2, None, 2, 3, 1]) == [2, 6, 7]
    assert exact_steps([5, 5, 5]) == []
    assert exact_steps([]) == []


def test_pelt_finds_one_clean_step_at_its_index():
    x = [10.0] * 20 + [13.0] * 20
    assert pelt(np.asarray(x) + np.tile([0.1, -0.1], 20)) == [20]


def _counts(step: float, noise: float, seeds: int = 100, n: int = 40, at: int = 25) -> tuple[int, int, int]:
    """(series where the step was found within 1 commit, series with a false step, total false steps)."""
    found = false_series = false_total = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        x = 100.0 * (1 + noise * rng.standard_normal(n))
        x[at:] *= 1 + step
        steps = noisy_steps(x)
        hit = [s for s in steps if abs(s - at) <= 1]
        wrong = [s for s in steps if abs(s - at) > 1]
        found += bool(hit) if step else 0
        false_series += bool(wrong)
        false_total += len(wrong)
    return found, false_series, false_total


def test_noisy_histories_without_a_step_raise_few_false_steps():
    _found, false_series, _total = _counts(step=0.0, noise=0.03)
    assert false_series <= 5, f"{false_series}/100 flat series got a false step"


def test_a_ten_percent_step_in_three_percent_noise_is_found_in_most_series():
    found, false_series, _total = _counts(step=0.10, noise=0.03)
    assert found >= 90, f"found in {found}/100"
    assert false_series <= 5, f"{false_series}/100 series got a false step besides"


def test_a_shift_below_the_minimum_is_not_reported():
    x = np.r_[np.full(20, 100.0), np.full(20, 102.0)] + np.tile([0.01, -0.01], 20)
    assert pelt(x) == [20] and noisy_steps(x) == []  # a real 2% shift, below the 5% a dashboard flags
