"""tune's settings that cannot decide, its ratios' direction, and its guard against contended runs."""

from __future__ import annotations

import pytest

from perfsuite.judge.adaptive import ABOutcome, Decision, decide
from perfsuite.tools.tune.records import RunRecord, Trial
from perfsuite.tools.tune.search import TUNE_RULE, SearchConfig, gain_rounds, rate_note
from perfsuite.tools.tune.targets import TuneError


def test_max_rounds_below_what_a_gain_needs_is_refused_saying_what_to_write() -> None:
    pairs, rounds = gain_rounds(TUNE_RULE)
    assert (pairs, rounds) == (7, 4)  # alpha 0.01: a signed-rank p below it needs 7 pairs of one sign
    with pytest.raises(TuneError, match=r"--max-rounds 3 cannot decide a gain.*7 pairs.*--max-rounds 4 or more"):
        SearchConfig(max_rounds=3)
    assert SearchConfig(max_rounds=4).max_rounds == 4


def test_an_undecided_step_is_described_in_samples_per_s_never_in_time_per_sample() -> None:
    # time per sample x0.697 in every pair but few pairs: samples/s x1.435, not yet decided
    d = decide([(1.0, 0.697 * (1 + 0.05 * (-1) ** k)) for k in range(6)], TUNE_RULE)
    assert d.outcome is ABOutcome.UNKNOWN and d.ratio is not None and d.ratio < 1
    note = rate_note(d, TUNE_RULE)
    assert "x0." not in note and "undecided after 6 pairs" in note
    # the case: samples/s x1.435 [1.171..1.759] after 3 rounds, undecided: an effect, not "no gain"
    d = Decision(ABOutcome.UNKNOWN, 6, ratio=1 / 1.435, low=1 / 1.759, high=1 / 1.171, p_faster=0.03, more_pairs=2)
    trial = Trial("persistent_workers", {"persistent_workers": False}, {"persistent_workers": True}, decision=d)
    trial.outcome = "undecided"
    assert trial.effect_without_gain
    assert rate_note(d, TUNE_RULE) == "undecided after 6 pairs: about 2 more pairs would decide it"


def test_a_gain_is_no_effect_without_gain() -> None:
    d = Decision(ABOutcome.IMPROVED, 8, ratio=0.7, low=0.6, high=0.8, p_faster=0.004, reason="faster")
    trial = Trial("num_workers", {}, {}, decision=d, outcome="gain")
    assert not trial.effect_without_gain
    assert rate_note(d, TUNE_RULE).startswith("samples/s higher by more than x1.05")


def test_a_contended_run_says_so_in_its_record() -> None:
    assert RunRecord({}, samples_per_s=10.0, contended="neighbours 90%").to_dict()["contended"] == "neighbours 90%"
    assert "contended" not in RunRecord({}, samples_per_s=10.0).to_dict()
