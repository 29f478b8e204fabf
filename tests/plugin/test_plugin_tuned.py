"""What tune leaves for the plugin: --perfsuite-knob over a test's own knobs, and tuned knobs named on failure."""

from __future__ import annotations

import pytest
from perfsuite_pytester import run

from perfsuite.tools.tune.lockin import write_thresholds

pytest_plugins = ["pytester"]

TEST = """
    def test_tuned(perf_run):
        result = perf_run("plugin_tiny", aug="none", num_workers={workers}, pin_memory=True, non_blocking=True)
        assert result.knobs["num_workers"] == {expect}
"""


def test_a_knob_override_replaces_the_tests_own_knob_and_is_noted(project):
    project.makepyfile(TEST.format(workers=0, expect=1))
    out = run(project, "--perfsuite-knob", "num_workers=1", "--perfsuite-save")
    out.assert_outcomes(passed=1)
    saved = (project.path / "baselines").rglob("*.json")
    assert any("loader knobs set by --perfsuite-knob: num_workers=1" in p.read_text() for p in saved)


def test_a_bad_knob_override_is_a_usage_error(project):
    project.makepyfile(TEST.format(workers=0, expect=0))
    out = run(project, "--perfsuite-knob", "amp=bf16")
    assert out.ret == 4
    out.stderr.fnmatch_lines(["*--perfsuite-knob 'amp=bf16': write NAME=VALUE with NAME one of num_workers*"])


@pytest.mark.slow
def test_a_failing_bound_names_the_tuned_knob_the_run_no_longer_has(project):
    """The bound cannot pass (1e9 samples/s): the point is what the failure says about the knobs."""
    write_thresholds(
        project.path / "pyproject.toml", "cpu", "test_tuned", {"min_samples_per_s": 1e9}, {"num_workers": 1}, "x", False
    )
    (project.path / "baselines").mkdir()
    project.makepyfile(TEST.format(workers=0, expect=0))
    undone = run(project, "--perfsuite-compare")
    assert undone.ret == 1
    undone.stdout.fnmatch_lines(
        [
            "*test_tuned: undoes the tuning: slow steps: samples_per_s * < 1000000000 (num_workers=0 (perfsuite tune "
            "chose num_workers=1)*"
        ]
    )
    project.makepyfile(TEST.format(workers=1, expect=1))
    kept = run(project, "--perfsuite-compare")
    assert kept.ret == 1 and "undoes the tuning" not in kept.stdout.str()


# A loader that needs 2 workers to keep up with the step, and gains nothing from more. Its costs are sleeps, and the
# step does no other work, so they hold on a loaded 2-core machine: a sample takes >= 20 ms to load (a batch of 4:
# >= 80 ms per worker), a step >= 60 ms. One worker: >= 80 ms a step; two: the step's 60 ms; four: the same. And
# without workers samples/s cannot exceed 4 / (80 + 60) ms = 29, whatever the machine does: the undone case fails.
# Windows of 10 steps: the batches workers prefetch before the window would blur a shorter one.
PLANTED = """
import time

import torch
from torch.utils.data import Dataset

import perfsuite


class Sleepy(Dataset):
    def __len__(self):
        return 4000

    def __getitem__(self, i):
        time.sleep(0.020)
        return torch.ones(8), i % 2


def planted_sleepy(device="cpu"):
    def step(batch):
        time.sleep(0.060)
        return batch[0].sum()

    return perfsuite.Job(step=step, dataset=Sleepy(), loader_kwargs={"batch_size": 4}, name="planted_sleepy")


perfsuite.register_job("planted_sleepy", planted_sleepy)
"""


@pytest.mark.slow
def test_tune_finds_the_knee_and_its_thresholds_fail_a_later_compare_that_undoes_it(project, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFSUITE_WALL_BOUND", "1")  # the search is tested, beside the other test workers' load
    from perfsuite.core.knobs import Knobs
    from perfsuite.judge.adaptive import ABRule
    from perfsuite.tools.tune import InProcessTarget, SearchConfig, lock_in, tune

    namespace: dict = {}
    exec(PLANTED.replace('perfsuite.register_job("planted_sleepy", planted_sleepy)', ""), namespace)
    target = InProcessTarget(namespace["planted_sleepy"], "job", "smoke", Knobs(), steps=10, warmup=2, sol_steps=0)
    target.test_key = "test_planted"
    # alpha 0.05: a consistent gain is called after 6 pairs (3 rounds), so each step costs 12 runs
    rule = ABRule(factor=1.05, margin=1.05, alpha=0.05)
    config = SearchConfig(rule=rule, max_workers=4, max_rounds=3, knobs=("num_workers",))
    report = tune(target, config)
    steps = [(t.head["num_workers"], t.outcome) for t in report.search.trials]
    assert steps[0] == (2, "gain") and steps[1][0] == 4 and steps[1][1] != "gain", steps
    assert report.chosen["num_workers"] == 2 and report.thresholds["min_samples_per_s"] > 29
    written = lock_in(report, tmp_path / "tuned", project.path / "pyproject.toml")
    assert written.tune_file is not None and written.thresholds is not None
    project.makeconftest(PLANTED)
    (project.path / "baselines").mkdir()
    project.makepyfile("def test_planted(perf_run):\n    perf_run('planted_sleepy', num_workers=0)\n")
    undone = run(project, "--perfsuite-compare", "--perfsuite-steps", "10", "--perfsuite-warmup", "2")
    assert undone.ret == 1
    undone.stdout.fnmatch_lines(["*undoes the tuning*num_workers=0 (perfsuite tune chose num_workers=2)*"])
