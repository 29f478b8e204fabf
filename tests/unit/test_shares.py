"""The per-step share rule (data_wait_frac): an absolute margin, and the session's factor on top."""

from __future__ import annotations

from perfsuite.judge.timing import compare_shares
from perfsuite.judge.verdict import Outcome

BASE = [0.20, 0.22, 0.24, 0.21, 0.23, 0.25, 0.22, 0.24]
HEAD = [0.36, 0.38, 0.40, 0.37, 0.39, 0.41, 0.38, 0.40]  # +0.16: past the 0.10 margin, x1.72


def test_a_rise_past_the_margin_is_a_regression_at_the_default_factor():
    t = compare_shares(BASE, HEAD, 0.10, factor=1.05)
    assert t.outcome is Outcome.REGRESSED and t.reason.startswith("rose by 0.16 (>= 0.1)")


def test_a_session_factor_above_the_ratio_makes_it_unchanged_and_says_so():
    t = compare_shares(BASE, HEAD, 0.10, factor=50)
    assert t.outcome is Outcome.UNCHANGED and "within x50 (the session's factor)" in t.reason
    assert compare_shares(HEAD, BASE, 0.10, factor=50).outcome is Outcome.UNCHANGED  # both directions


def test_a_rise_within_the_margin_is_unchanged_whatever_the_factor():
    small = [v + 0.05 for v in BASE]
    assert compare_shares(BASE, small, 0.10, factor=1.0).outcome is Outcome.UNCHANGED
