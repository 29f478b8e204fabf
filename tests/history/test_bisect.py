"""perfsuite bisect on a repository made here: 16 commits, a per-step `.item()` added at commit 11. One run
per commit (an exact counter), the culprit named with the new call site's line; resumable from its state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.tools.history.bisect import bisect, check_metric, commits_between
from perfsuite.tools.history.store import HistoryError

pytestmark = pytest.mark.slow

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

def main():
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=4)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            # STEP-END

if __name__ == "__main__":
    main()
"""


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q")
    shas = []
    for i in range(1, 17):
        text = SCRIPT.replace("# STEP-END", "print(loss.item())  # the bug" if i >= 11 else f"# commit {i}")
        (repo / "train.py").write_text(f"# version {i}\n" + text)  # every commit moves a line of the file
        _git(repo, "add", "train.py")
        _git(repo, "commit", "-qm", f"commit {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def test_bisect_finds_the_commit_that_added_a_sync_and_names_its_line(repo, tmp_path: Path) -> None:
    path, shas = repo
    state = tmp_path / "state.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite.cli",
            "bisect",
            shas[0],
            shas[-1],
            "--metric",
            "syncs_per_step",
            "--repo",
            str(path),
            "--history",
            str(tmp_path / "h"),
            "--state",
            str(state),
            "--steps",
            "3",
            "--",
            "python",
            "train.py",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith(f"first changed: {shas[10][:12]} 'commit 11'"), last
    assert "Tensor.item (read) at train.py:" in last and "(new)" in last, last
    runs = json.loads(state.read_text())["values"]
    assert len(runs) <= 6, f"{len(runs)} runs for 15 commits: one run per commit, binary search"
    assert len(list((tmp_path / "h").rglob("*.json"))) == len(runs)  # every run recorded in the history


def test_a_resumed_bisect_measures_nothing_again(repo, tmp_path: Path) -> None:
    path, shas = repo
    state = tmp_path / "state.json"
    calls: list[str] = []

    def measure(sha):
        calls.append(sha)
        raise KeyboardInterrupt if len(calls) == 3 else RuntimeError("unused")

    values = {shas[0]: 0.0, shas[-1]: 1.0}
    state.write_text(json.dumps({"good": shas[0], "bad": shas[-1], "metric": "syncs_per_step", "values": values}))
    seen: list[str] = []
    with pytest.raises(RuntimeError):  # the first commit not in the state is measured, nothing before it
        bisect(path, shas[0], shas[-1], "syncs_per_step", measure, state_path=state, say=seen.append)
    assert calls and calls[0] not in values and "resuming: 2 commit(s) measured before" in seen


def test_bad_requests_are_refused_before_any_run(repo) -> None:
    path, shas = repo
    with pytest.raises(HistoryError, match="is a label metric"):
        check_metric("input_format")
    with pytest.raises(HistoryError, match="not a perfsuite metric"):
        check_metric("nope")
    with pytest.raises(HistoryError, match="is not an ancestor"):
        commits_between(path, shas[-1], shas[0])
    assert len(commits_between(path, shas[0], shas[-1])) == 15


def test_timing_bisect_end_to_end_finds_a_slower_step(tmp_path: Path) -> None:
    """3 commits, each step sleeping 20 ms, 60 ms from commit 3 on (a sleep, so that the 2-core VM's load does
    not drown it): each probe an interleaved A/B of real ``perfsuite exec`` runs; every run recorded."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shas = []
    for i in range(1, 4):
        step = f"__import__('time').sleep({0.06 if i >= 3 else 0.02})  # commit {i}"
        (repo / "train.py").write_text(SCRIPT.replace("# STEP-END", step))
        _git(repo, "add", "train.py")
        _git(repo, "commit", "-qm", f"commit {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    state = tmp_path / "state.json"
    cmd = [sys.executable, "-m", "perfsuite.cli", "bisect", shas[0], shas[-1], "--metric", "step_ms"]
    cmd += ["--repo", str(repo), "--history", str(tmp_path / "h"), "--state", str(state), "--steps", "4"]
    cmd += ["--delta", "0.5", "--max-rounds", "8", "--", "python", "train.py"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout + out.stderr
    print(out.stdout)
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith(f"first changed: {shas[2][:12]} 'commit 3': step_ms "), last
    probes = json.loads(state.read_text())["probes"]
    assert set(probes) == {shas[1], shas[2]} and probes[shas[1]]["outcome"] == "same"
    runs = sum(p["runs"] for p in probes.values())
    assert len(list((tmp_path / "h").rglob("*.json"))) == runs  # every run recorded in the history


@pytest.mark.parametrize(
    "rest",
    [["--", "python", "train.py", "--epochs", "1"], ["--steps", "3", "--", "python", "train.py"], ["--test", "t::x"]],
)
def test_bisect_without_a_metric_says_the_metric_is_missing(rest: list[str], capsys) -> None:
    """Issue 56 item 5: ``bisect GOOD BAD -- python train.py`` said "unrecognized arguments: python train.py"."""
    from perfsuite.cli.main import main

    assert main(["bisect", "v1", "v2", *rest]) == 2
    err = capsys.readouterr().err
    assert "unrecognized" not in err and "--metric is missing" in err, err
    shown = " ".join(rest[rest.index("--") :] if "--" in rest else rest)
    assert err.strip().endswith(f"e.g. perfsuite bisect v1 v2 --metric syncs_per_step {shown}"), err
