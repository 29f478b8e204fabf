"""Which tests each round of ``perfsuite ab`` runs: after ``--min-rounds``, only the undecided ones.

The pytest processes are replaced by a stand-in that returns seeded synthetic
Results (one test clearly slower on HEAD, one identical on both), so the
deselection is checked exactly, without timing anything.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from fixed_fingerprint import FP

from perfsuite.ab import engine as ab
from perfsuite.core.results import Metric, Result
from perfsuite.judge.adaptive import ABOutcome, AdaptiveAB, RunValues

SLOW = "test_x.py::test_slow"
SAME = "test_x.py::test_same"
NOISY = "test_x.py::test_noisy"


def _result(ms: float) -> Result:
    steps = [ms] * 8
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={"step_ms": Metric("step_ms", ms, "ms")},
        samples={"step_ms": steps},
        fingerprint=FP,
        batch_size=4,
        steps=len(steps),
        warmup=0,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    path = tmp_path / "proj"
    path.mkdir()
    (path / "f.txt").write_text("x\n")
    steps = (
        ["init", "-q"],
        ["add", "."],
        ["commit", "-q", "-m", "one"],
        ["commit", "-q", "--allow-empty", "-m", "two"],
    )
    for args in steps:
        subprocess.run(
            ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            check=True,
            capture_output=True,
        )
    return path


def test_decided_tests_are_deselected_after_the_minimum_rounds(repo: Path, monkeypatch):
    rng = random.Random(3)
    calls: list[list[str]] = []

    def fake_run_side(side, worktree, pytest_args, out_dir, python, timeout_s):
        calls.append(list(pytest_args))
        deselected = {pytest_args[i + 1] for i, a in enumerate(pytest_args) if a == "--deselect"}
        noise = rng.uniform(0.97, 1.03)
        times = {SLOW: 10.0 * (1.3 if side == "B" else 1.0), SAME: 10.0, NOISY: 10.0 * rng.uniform(0.6, 1.6)}
        results = {t: _result(ms * noise) for t, ms in times.items() if t not in deselected}
        return ab.SideRun(side, results, 0.0, 0)

    monkeypatch.setattr(ab, "run_side", fake_run_side)
    session = ab.run_ab(repo, "HEAD~1", "HEAD", ["test_x.py"], max_rounds=8, min_rounds=3, budget_s=1e6)

    verdicts = {t.test_id: t.decision.outcome for t in session.tests}
    assert verdicts[SLOW] is ABOutcome.REGRESSED and verdicts[SAME] is ABOutcome.SAME
    assert verdicts[NOISY] is ABOutcome.UNKNOWN  # +-30% noise per run cannot be decided in 8 rounds
    decided_at = {t.test_id: t.decided_at for t in session.tests if t.decided_at is not None}
    rounds = [calls[i : i + 4] for i in range(0, len(calls), 4)]
    assert len(rounds) == 8
    for r, runs in enumerate(rounds):
        assert len({tuple(a) for a in runs}) == 1  # the four runs of a round run the same tests
        # decided_at counts rounds from 1: a test decided by round r's pairs is left out from round r + 1 on,
        # and nothing is left out before the minimum of 3 rounds
        gone = sorted(t for t, at in decided_at.items() if at <= r) if r >= 3 else []
        assert runs[0] == ["test_x.py", *(a for t in gone for a in ("--deselect", t))], (r, runs[0])
    assert rounds[-1][0][1:] == ["--deselect", SAME, "--deselect", SLOW]


def test_a_node_with_one_undecided_result_keeps_running():
    loop = AdaptiveAB()
    same = [RunValues(1.0)] * 4
    for _ in range(4):
        loop.add_round("ABBA", {"t.py::a#first": same, "t.py::a#second": [None] * 4, "t.py::b": same})
    assert loop.tracks["t.py::a#first"].decision.outcome is ABOutcome.SAME
    assert ab.decided_nodes(loop) == ["t.py::b"]


def test_the_per_run_statistic_is_the_fastest_step_per_sample_unless_told():
    result = _result(10.0)
    result.samples["step_ms"] = [12.0, 10.0, 30.0, 11.0, 14.0]  # batch 4
    assert ab.per_run_values(result).value == 2.5
    assert ab.per_run_values(result, "median").value == 3.0
    assert ab.per_run_values(result, "p10").value == (10.0 + 0.4 * 1.0) / 4
    assert ab.per_run_values(result).extras["step_ms_p99"] > 2.0  # the tail stays relative to the median


def test_no_round_starts_whose_expected_end_passes_the_budget(repo: Path, monkeypatch):
    """Rounds of 10 s and 50 s in turn, a budget of 100 s. Before: the mean round (30 s, then 23 s) let rounds 3 and 4
    start, and the session ended at 120 s. Now after 60 s the longest round measured (50 s) says a third would not
    fit (it might take as long)."""
    now = [0.0]
    calls: list[int] = []

    def fake_run_side(side, worktree, pytest_args, out_dir, python, timeout_s):
        round_index = len(calls) // 4
        calls.append(round_index)
        now[0] += 2.5 if round_index % 2 == 0 else 12.5
        return ab.SideRun(side, {NOISY: _result(10.0 * random.Random(len(calls)).uniform(0.6, 1.6))}, 0.0, 0)

    monkeypatch.setattr(ab, "run_side", fake_run_side)
    monkeypatch.setattr(ab, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: now[0])}))
    session = ab.run_ab(repo, "HEAD~1", "HEAD", ["test_x.py"], max_rounds=20, min_rounds=1, budget_s=100.0)
    assert session.elapsed_s <= 100.0
    assert len(session.loop.orders) == 2 and session.elapsed_s == 60.0
    assert "another round would end at about 110 s" in session.stopped


def test_the_budget_check_uses_the_longest_round() -> None:
    assert ab.budget_overrun(70.0, [10.0, 50.0, 10.0], 100.0)
    assert not ab.budget_overrun(40.0, [10.0, 50.0], 100.0)
