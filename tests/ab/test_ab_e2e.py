"""``perfsuite ab`` end to end on two tiny commits of a temporary git repository.

The repository holds a perf test of a tiny registered workload; the second
commit adds a ``.item()`` per step in the workload's loss. The verdict on
that is exact (syncs_per_step 0 -> 1 with its call site), so the test
asserts it and the exit status, never a timing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from perfsuite.cli.main import main

pytestmark = pytest.mark.slow

WORKLOAD = """
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfsuite.augment.recipe import Recipe
from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.registry import register_workload


@register_workload
class TinyAB(Workload):
    name = "tiny_ab"
    summary = "16x16 RGB, two classes, one conv"
    seed_doc = "test"
    target_kind = "label"
    image_format = "png"
    num_classes = 2
    scales = {"smoke": Scale("smoke", (16, 16), num_samples=16, batch_size=4, model={}),
              "full": Scale("full", (16, 16), num_samples=16, batch_size=4, model={})}

    def generate(self, index, rng, scale):
        return Sample(image=rng.integers(0, 255, size=(16, 16, 3), dtype=np.uint8), target=index % 2)

    def recipe(self):
        return Recipe().only("flip")

    def build_model(self, scale):
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))

    def loss(self, output, target):
        loss = F.cross_entropy(output, target)
        return loss
"""

TEST = """
import pytest


@pytest.mark.perf(max_syncs_per_step=1)
def test_tiny(perf_run):
    perf_run("tiny_ab", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "tiny_workload.py").write_text(WORKLOAD)
    (repo / "conftest.py").write_text("import tiny_workload  # noqa: F401  (registers the workload)\n")
    (repo / "test_tiny.py").write_text(TEST)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    text = WORKLOAD.replace(
        "        return loss\n",
        "        print_every = loss.item()  # the regression: a read per step\n        return loss\n",
    )
    (repo / "tiny_workload.py").write_text(text)
    _git(repo, "commit", "-q", "-am", "read the loss every step")
    return repo


@pytest.fixture(autouse=True)
def _no_hang():
    """Subprocess sessions could hang: dump stacks and exit rather than block CI (tests/README.md)."""
    import faulthandler

    faulthandler.dump_traceback_later(900, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def test_ab_names_the_new_sync_and_exits_1(tiny_repo: Path, tmp_path: Path, capsys):
    md, js = tmp_path / "ab.md", tmp_path / "ab.json"
    code = main(
        [
            "ab",
            "--repo",
            str(tiny_repo),
            "--max-rounds",
            "1",
            "--min-rounds",
            "0",
            "--budget",
            "600",
            "--report-md",
            str(md),
            "--report-json",
            str(js),
            "HEAD~1",
            "HEAD",
            "test_tiny.py",
            "--perfsuite-steps",
            "4",
            "--perfsuite-warmup",
            "1",
        ]
    )
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    data = json.loads(js.read_text())
    (test,) = data["tests"]
    assert test["test_id"] == "test_tiny.py::test_tiny" and test["verdict"] == "regressed"
    syncs = [v for v in test["exact"] if v["metric"] == "syncs_per_step"]
    assert len(syncs) == 1 and syncs[0]["outcome"] == "regressed"
    assert (syncs[0]["base"], syncs[0]["head"]) == (0, 1)
    assert "Tensor.item (read) at" in syncs[0]["message"] and "tiny_workload.py:" in syncs[0]["message"]
    assert data["runs"] == 4 and data["rounds"] == 1 and data["orders"][0] in ("ABBA", "BAAB")
    assert "syncs_per_step 0 -> 1 (exact): Tensor.item (read) at" in md.read_text()
    assert test["step_ms_per_sample"]["outcome"] == "unknown"  # one round cannot decide a timing
    # the worktrees are gone
    listed = subprocess.run(["git", "-C", str(tiny_repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1


def test_unknown_revision_and_not_a_repo_exit_2(tiny_repo: Path, tmp_path: Path, capsys):
    assert main(["ab", "--repo", str(tiny_repo), "nope", "HEAD", "test_tiny.py"]) == 2
    assert "unknown revision 'nope'" in capsys.readouterr().err
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(["ab", "--repo", str(plain), "HEAD~1", "HEAD"]) == 2
    assert "not inside a git repository" in capsys.readouterr().err


def test_changed_dependencies_run_in_a_layered_venv_for_that_side(tiny_repo: Path, tmp_path: Path, capsys):
    """HEAD adds a requirement: HEAD gets a venv over the current environment (numpy is found there, so pip
    installs nothing new and needs no network), BASE keeps the current interpreter."""
    (tiny_repo / "requirements.txt").write_text("numpy\n")
    _git(tiny_repo, "add", "requirements.txt")
    _git(tiny_repo, "commit", "-q", "-m", "a dependency")
    js = tmp_path / "ab.json"
    args = ["--max-rounds", "1", "--min-rounds", "0", "--report-json", str(js), "HEAD~1", "HEAD", "test_tiny.py"]
    code = main(["ab", "--repo", str(tiny_repo), *args, "--perfsuite-steps", "2", "--perfsuite-warmup", "1"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err  # the same code on both sides: nothing exact moved
    data = json.loads(js.read_text())
    assert data["environment"].startswith("BASE: current environment; HEAD: own venv over the current one, with pip ")
    assert "requirements.txt: +numpy" in data["environment"]
    (test,) = data["tests"]
    assert data["runs"] == 4 and test["missing"] == [] and test["exact"]
