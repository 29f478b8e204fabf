"""A perf session says before it starts how long it should take: from its tests' runs recorded on this machine,
else the scale's default; and it records what they took for the next session (perfsuite.plugin.estimate)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from perfsuite_pytester import run, unfolded

from perfsuite.plugin import estimate

pytest_plugins = ["pytester"]


def test_the_estimate_is_the_default_first_then_the_recorded_runs(project, monkeypatch, tmp_path):
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "own-cache"))  # a record of its own
    project.makepyfile("""
        def test_one(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0)
    """)
    first = run(project, "-p", "no:benchmark")
    first.assert_outcomes(passed=1)
    unfolded(first).fnmatch_lines(
        ["perfsuite: this session's 1 perf test(s) at scale smoke should take about 15 s (1 at the smoke scale's*"]
    )
    record = json.loads((Path(os.environ["PERFSUITE_CACHE"]) / estimate.RECORD).read_text())
    (seconds,) = record["cpu"]["smoke"].values()
    assert seconds > 0
    # the longest phases named, the rest counted (-v names them all)
    unfolded(first).fnmatch_lines(["perfsuite: phases of 1 run(s), in all: * s: * more (* s; -v lists them)"])
    second = run(project, "-p", "no:benchmark")
    unfolded(second).fnmatch_lines(["*should take about * (1 from their runs recorded on this machine)"])


def test_time_left_is_the_unfinished_tests_less_the_running_ones_time():
    plan = estimate.estimate(["a", "b", "c"], {"a": 10.0}, "full")
    assert plan.seconds == {"a": 10.0, "b": 75.0, "c": 75.0} and plan.recorded == 1
    plan.start("a")
    assert plan.left_s(now=plan.current[1] + 4.0) == 156.0
    assert plan.left_s(now=plan.current[1] + 40.0) == 150.0  # a test over its estimate leaves the others'
    plan.finish("a")
    assert plan.left_s() == 150.0
    assert "test 2/3" in plan.progress("window", 3, 30)


def test_an_unreadable_record_is_no_estimate_never_an_error(tmp_path):
    bad = tmp_path / estimate.RECORD
    bad.write_text("{not json")
    assert estimate.load(bad, "cpu", "smoke") == {}
    assert estimate.clock(3725) == "1 h 02 min" and estimate.clock(75) == "1 min 15 s"


def test_a_test_that_ran_without_a_result_is_recorded_as_taking_none(tmp_path):
    path = tmp_path / estimate.RECORD
    estimate.save(path, "cpu", "smoke", {}, ran=["tests/perf/test_gpu.py::test_only_on_cuda"])
    assert estimate.load(path, "cpu", "smoke") == {"tests/perf/test_gpu.py::test_only_on_cuda": 0.0}


def test_each_skip_reason_is_in_perfsuite_s_summary_folded(project):
    """The perf session runs without pytest's -rs (its lines run to 130-180 columns): the reasons are perfsuite's."""
    project.makepyfile("""
        import pytest

        def test_one(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0)

        @pytest.mark.parametrize("k", [1, 2])
        def test_gpu(k):
            pytest.skip("needs a CUDA device: " + "the ratio of two placements says nothing about feeding a GPU " * 2)
    """)
    out = run(project, "-p", "no:benchmark")
    out.assert_outcomes(passed=1, skipped=2)
    unfolded(out).fnmatch_lines(["perfsuite: 2 skipped: needs a CUDA device: the ratio of two placements says*"])
    assert all(len(line) <= 80 for line in out.outlines if line.startswith(("perfsuite: 2 skipped", "  the ratio")))
