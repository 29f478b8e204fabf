"""Results land in pytest-benchmark's own JSON, so its tools (compare, histogram) still read them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from perfsuite_pytester import read_json, run

pytest_plugins = ["pytester"]


@pytest.mark.slow
def test_benchmark_json_holds_step_times_as_stats_and_our_summary_as_extra_info(project, monkeypatch):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_loader(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
            perf_run("plugin_tiny", aug="cpu", num_workers=0, pin_memory=True, non_blocking=True, label="cpu-aug")
    """)
    # pytest-benchmark writes no JSON from an xdist worker (it reads PYTEST_XDIST_WORKER); the inner session is none.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    run(project, "--benchmark-json", "bench.json").assert_outcomes(passed=1)
    [bench] = read_json(project.path / "bench.json")["benchmarks"]
    assert bench["name"] == "test_loader" and bench["group"] == "perfsuite:plugin_tiny"
    assert bench["stats"]["rounds"] == 5 and len(bench["stats"]["data"]) == 5
    assert all(0 < t < 60 for t in bench["stats"]["data"])  # seconds per step, not ms
    info = bench["extra_info"]["perfsuite"]
    first, labelled = sorted(info)
    assert first.endswith("::test_loader") and labelled == first + "#cpu-aug"
    assert info[first]["knobs"]["aug"] == "none" and info[labelled]["knobs"]["aug"] == "cpu"
    assert info[first]["metrics"]["samples_per_s"] > 0
    assert "gpu_util" in info[first]["unavailable"]
    verdicts = bench["extra_info"]["perfsuite_verdicts"]
    assert [(v["metric"], v["outcome"]) for v in verdicts] == [("syncs_per_step", "pass")] * 2

    compare = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(project.path / "bench.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compare.returncode == 0, compare.stderr
    assert "test_loader" in compare.stdout


def test_benchmark_disable_still_judges_and_records_nothing_in_stats(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_loader(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
    """)
    out = run(project, "--benchmark-disable", "-v")
    out.assert_outcomes(passed=1)
    out.stdout.fnmatch_lines(["*syncs_per_step*pass*"])
