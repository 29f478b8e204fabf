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


class BusyTarget:
    """A planted target (tests/tune/fakes.py) whose runs are contended where ``busy(knobs)`` says so."""

    def __init__(self, busy, speed=None) -> None:
        from fakes import FakeTarget, needs_two_workers

        self.inner = FakeTarget(speed or needs_two_workers)
        self.busy = busy
        for name in ("name", "kind", "device", "test_key"):
            setattr(self, name, getattr(self.inner, name))

    def run(self, setting, reference: bool = False) -> RunRecord:
        record = self.inner.run(setting, reference)
        if not reference and self.busy(record.knobs):
            record.contended = "neighbours and steal 76% of the usable CPU (bound 10%)"
        return record


def test_a_busy_machine_decides_no_step_and_tune_writes_nothing(tmp_path) -> None:
    """Issue 47: every run contended ("0 pair(s) so far"), and tune still wrote a setting into pyproject.toml."""
    from fakes import plenty

    from perfsuite.tools.tune import lock_in, tune

    report = tune(BusyTarget(lambda knobs: True), SearchConfig(max_workers=4, max_rounds=4), free=plenty)
    assert report.search.trials and not any(t.decided for t in report.search.trials)
    assert report.not_written and report.not_written.startswith("the machine was busy")
    assert report.stopped.startswith("not tuned: the machine was busy") and "no gain" not in report.stopped
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[project]\nname = 'x'\n")
    written = lock_in(report, tmp_path / "tuned", pyproject)
    assert written.tune_file is None and written.thresholds is None
    assert pyproject.read_text() == "[project]\nname = 'x'\n" and not (tmp_path / "tuned").exists()


def test_the_command_exits_3_saying_why_and_what_to_do(tmp_path, monkeypatch, capsys) -> None:
    from perfsuite.cli import tune as tune_cmd
    from perfsuite.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tune_cmd, "_target", lambda args: BusyTarget(lambda knobs: True))
    (tmp_path / "pyproject.toml").write_text("")
    assert main(["tune", "face_parsing", "--max-workers", "2", "--max-rounds", "4"]) == tune_cmd.NOT_MEASURED == 3
    err = capsys.readouterr().err
    assert "perfsuite tune: error: not tuned: the machine was busy" in err and "Run tune again when" in err
    assert (tmp_path / "pyproject.toml").read_text() == "" and not (tmp_path / "perfsuite-tuned").exists()


def test_never_no_gain_beside_arms_that_do_not_overlap() -> None:
    """The issue's persistent_workers arms, 44.3 [41..47.7] against 57.7 [50.6..63] samples/s, under 'no gain'."""
    from fakes import plenty

    from perfsuite.tools.tune import tune

    def speed(knobs) -> float:
        return (57.7 if knobs["persistent_workers"] else 44.3) * min(2, max(1, knobs["num_workers"]))

    report = tune(
        BusyTarget(lambda knobs: knobs["persistent_workers"], speed), SearchConfig(max_workers=2), free=plenty
    )
    [pw] = [t for t in report.search.trials if t.knob == "persistent_workers"]
    assert pw.outcome == "undecided" and pw.contended and pw.arms_apart()
    assert report.not_written is None  # num_workers was decided: its choice is measured
    assert "no further step was a measured gain" not in report.stopped
    assert "persistent_workers False -> True: undecided" in report.stopped and "measured apart" in report.stopped


class BusyFromTheStart(BusyTarget):
    """Every run contended, the reference run included: the machine was busy before tune began."""

    def run(self, setting, reference: bool = False) -> RunRecord:
        record = self.inner.run(setting, reference)
        record.contended = "neighbours and steal 70% of the usable CPU (bound 10%)"
        return record


def test_a_machine_busy_before_the_search_stops_tune_before_its_budget_is_spent() -> None:
    """Issue 56: under load tune spent its whole budget twice (216 s, 279 s) on runs it then discarded."""
    from fakes import plenty

    from perfsuite.judge.contention import Load
    from perfsuite.tools.tune import tune

    target = BusyFromTheStart(lambda knobs: True)
    report = tune(target, SearchConfig(max_workers=4, max_rounds=4), free=plenty, machine=lambda: Load(0.7, 1.0, 3.0))
    assert target.inner.runs == [target.inner.start] and not report.search.trials  # the reference run only
    assert report.not_written and report.not_written.startswith("the machine is busy: the reference run read")
    assert "other processes still took 70% of the usable CPU" in report.not_written
    assert "It would take: other processes below 10% of the usable cores" in report.not_written
    assert report.stopped.startswith("not tuned: the machine is busy")
    # the same reference run on a machine that has since quietened: the search goes ahead
    target = BusyFromTheStart(lambda knobs: True)
    quiet = tune(target, SearchConfig(max_workers=4, max_rounds=4), free=plenty, machine=lambda: Load(0.02, 0.0, 0.5))
    assert quiet.search.trials and len(target.inner.runs) > 1
    assert not (quiet.not_written or "").startswith("the machine is busy")
