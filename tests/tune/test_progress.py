"""Progress: live at a terminal, nothing under CI or when piped."""

from __future__ import annotations

import io

from perfsuite.judge.adaptive import ABOutcome, Decision
from perfsuite.tools.tune.progress import Live, Quiet, for_stream, trial_line
from perfsuite.tools.tune.records import Trial


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def trial() -> Trial:
    t = Trial("num_workers", {"num_workers": 1}, {"num_workers": 2}, outcome="gain")
    t.decision = Decision(ABOutcome.IMPROVED, 8, ratio=0.5, low=0.4, high=0.625)
    return t


def test_a_decided_step_reads_as_a_samples_per_s_ratio_with_its_interval() -> None:
    assert trial_line(trial()) == "num_workers 1 -> 2: gain, samples/s x2.000 [1.600..2.500], 8 pairs"


def test_piped_or_under_ci_it_is_quiet(monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert type(for_stream(io.StringIO())) is Quiet
    monkeypatch.setenv("CI", "true")
    assert type(for_stream(Terminal())) is Quiet


def test_at_a_terminal_each_decided_step_is_printed(monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    stream = Terminal()
    live = for_stream(stream)
    assert isinstance(live, Live)
    live.update("num_workers 1 -> 2: round 1/5, run 1/4 (A)")
    live.trial_done(trial())
    live.close()
    assert "num_workers 1 -> 2: gain, samples/s x2.000 [1.600..2.500], 8 pairs" in stream.getvalue()
