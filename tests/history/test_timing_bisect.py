"""Bisect of a timing metric on a repository made here (16 commits), with a fake measure: synthetic step times
per commit, noise from a seeded RNG. Each probe is an interleaved A/B against GOOD decided by the ab rule; a
change too small for the noise is reported inconclusive, never guessed; a resumed bisect probes nothing twice."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from perfsuite.core.results import Fingerprint, Result
from perfsuite.judge.adaptive import ABRule
from perfsuite.tools.history.bisect import check_metric
from perfsuite.tools.history.store import HistoryStore
from perfsuite.tools.history.timing_bisect import bisect_timing

FP = Fingerprint("cpu", None, 0, None, None, "2.13.0", None, "3.11", "Test CPU", 2, "linux")
RULE = ABRule(factor=1.05, margin=1.05)


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q")
    shas = []
    for i in range(1, 17):
        (repo / "train.py").write_text(f"# version {i}\n")
        _git(repo, "add", "train.py")
        _git(repo, "commit", "-qm", f"commit {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


class FakeMeasure:
    """Step times of 10 ms, times ``step`` from commit ``at`` on, times lognormal noise of ``noise`` (seeded)."""

    def __init__(self, shas: list[str], step: float, at: int = 11, noise: float = 0.03, seed: int = 1) -> None:
        self.index = {sha: i + 1 for i, sha in enumerate(shas)}
        self.step, self.at, self.noise = step, at, noise
        self.rng = random.Random(seed)
        self.calls: list[str] = []

    def __call__(self, sha: str) -> Result:
        self.calls.append(sha)
        mean = 10.0 * (self.step if self.index[sha] >= self.at else 1.0)
        value = mean * self.rng.lognormvariate(0.0, self.noise)
        return Result("train.py", "smoke", {}, {}, {"step_ms": [value]}, FP, batch_size=1, steps=1, warmup=0)


def value_of(result: Result) -> float:
    return float(result.samples["step_ms"][0])


def test_a_30_percent_step_at_commit_11_is_found_and_every_run_recorded(repo, tmp_path: Path) -> None:
    path, shas = repo
    measure = FakeMeasure(shas, step=1.30)
    store = HistoryStore(tmp_path / "h")
    out = bisect_timing(path, shas[0], shas[-1], "step_ms", measure, value_of, RULE, 10, store, tmp_path / "s.json")
    assert out.status == "found", out.describe()
    assert out.culprit == shas[10] and out.parent == shas[9] and out.subject == "commit 11"
    # BAD, then a binary search over 15 commits: 5 probes, each at least 3 rounds of 4 runs
    assert len(out.probes) == 5 and out.runs == len(measure.calls) == sum(p.runs for p in out.probes)
    assert all(p.runs % 4 == 0 and p.runs >= 12 for p in out.probes)
    assert {p.verdict for p in out.probes} <= {"same", "regressed"}
    culprit = next(p for p in out.probes if p.commit == shas[10])
    assert culprit.ratio is not None and 1.2 < culprit.ratio < 1.4
    assert "commit 11" in out.describe() and "first changed after" in out.describe()
    assert len(list(store.entries())) == out.runs  # every run in the history, none lost to the dedup


def test_a_tiny_noisy_change_is_inconclusive_not_guessed(repo, tmp_path: Path) -> None:
    path, shas = repo
    measure = FakeMeasure(shas, step=1.06, noise=0.15, seed=3)
    out = bisect_timing(path, shas[0], shas[-1], "step_ms", measure, value_of, RULE, max_rounds=4)
    assert out.status == "inconclusive" and out.culprit is None
    assert out.stopped_at is not None and out.stopped_at.verdict == "unknown"
    assert out.doubt == shas[1:]  # BAD itself undecided: the whole range stays in doubt
    assert out.runs == 16 and "inconclusive" in out.describe() and "not narrowed" in out.describe()


def test_a_probe_that_moved_the_other_way_stops_the_bisect(repo, tmp_path: Path) -> None:
    path, shas = repo
    measure = FakeMeasure(shas, step=1.30)
    plain = measure.__call__

    def faster_at_5_to_10(sha: str) -> Result:  # commits 5..10 run 30% faster: the first midpoint, 8, is one
        result = plain(sha)
        if 5 <= measure.index[sha] <= 10:
            result.samples["step_ms"][0] *= 0.7
        return result

    out = bisect_timing(path, shas[0], shas[-1], "step_ms", faster_at_5_to_10, value_of, RULE)
    assert out.status == "inconclusive" and out.culprit is None
    assert out.stopped_at is not None and out.stopped_at.commit == shas[7] and out.stopped_at.verdict == "improved"
    assert "the opposite of BAD's regressed" in out.describe() and out.doubt == shas[1:]


def test_no_change_says_same(repo, tmp_path: Path) -> None:
    path, shas = repo
    out = bisect_timing(path, shas[0], shas[-1], "step_ms", FakeMeasure(shas, step=1.0, noise=0.01), value_of, RULE)
    assert out.status == "same" and len(out.probes) == 1 and "nothing to bisect" in out.describe()


def test_a_resumed_bisect_does_not_probe_a_decided_commit_again(repo, tmp_path: Path) -> None:
    path, shas = repo
    state = tmp_path / "state.json"
    full = bisect_timing(path, shas[0], shas[-1], "step_ms", FakeMeasure(shas, step=1.30), value_of, RULE)
    limit = full.probes[0].runs + full.probes[1].runs + 2  # the same seeded runs, cut off in the third probe
    measure = FakeMeasure(shas, step=1.30)

    def interrupted(sha: str) -> Result:
        if len(measure.calls) == limit:
            raise KeyboardInterrupt
        return measure(sha)

    with pytest.raises(KeyboardInterrupt):
        bisect_timing(path, shas[0], shas[-1], "step_ms", interrupted, value_of, RULE, state_path=state)
    decided = set(json.loads(state.read_text())["probes"])
    assert len(decided) == 2 and shas[-1] in decided
    seen: list[str] = []
    before = len(measure.calls)
    out = bisect_timing(path, shas[0], shas[-1], "step_ms", measure, value_of, RULE, state_path=state, say=seen.append)
    assert "resuming: 2 commit(s) decided before" in seen
    assert out.status == "found" and out.culprit == shas[10]
    assert not decided & set(measure.calls[before:])  # the decided commits were not run again
    again = FakeMeasure(shas, step=1.30)
    bisect_timing(path, shas[0], shas[-1], "step_ms", again, value_of, RULE, state_path=state)
    assert again.calls == []  # everything decided: a rerun measures nothing


def test_timing_metrics_are_accepted_and_others_refused() -> None:
    assert check_metric("step_ms") == "timing" and check_metric("samples_per_s") == "timing"
    assert check_metric("syncs_per_step") == "exact"
