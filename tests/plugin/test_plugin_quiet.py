"""A second green run of a perf suite (9 results, as tests/perf has more than 8) is a screenful: 40 lines or
fewer at 80 columns (issue 56).

``nox -s perf`` passes ``--benchmark-quiet`` (pytest-benchmark's tables were 48 of its 87 lines, at 210-216
columns); ``nox -s perf -- --benchmark-tables`` brings them back. This inner session runs as that session does.
"""

from __future__ import annotations

import os

import pytest
from perfsuite_pytester import run

pytest_plugins = ["pytester"]

SUITE = """
    import pytest

    @pytest.mark.perf(max_syncs_per_step=0)
    @pytest.mark.parametrize("case", range(4))
    @pytest.mark.parametrize("aug", ["none", "cpu"])
    def test_loader(perf_run, aug, case):
        perf_run("plugin_tiny", aug=aug, num_workers=0, pin_memory=True, non_blocking=True)

    @pytest.mark.perf(max_syncs_per_step=0)
    def test_step(perf_run):
        perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, amp="bf16")

    def test_on_a_gpu():
        pytest.skip("needs a CUDA GPU")
"""
# As noxfile.py's perf session runs the suite, without xdist (a lenient factor: timing is not what this is about).
PERF_SESSION = ("-p", "no:xdist", "-q", "--perfsuite-compare", "--perfsuite-factor", "50")


@pytest.mark.slow
def test_a_second_green_perf_run_is_a_screenful_and_the_benchmark_tables_are_one_flag_away(project, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    project.makepyfile(test_perf=SUITE)
    run(project, "--perfsuite-save", "--perfsuite-update-exact").assert_outcomes(passed=9, skipped=1)
    quiet = run(project, *PERF_SESSION, "--benchmark-quiet")
    quiet.assert_outcomes(passed=9, skipped=1)
    lines = quiet.outlines
    assert len(lines) <= 40, "\n".join(lines)
    ours = lines[lines.index(next(line for line in lines if " perfsuite " in line)) :]  # pytest's header aside
    assert max(map(len, ours)) <= 80, "\n".join(line for line in ours if len(line) > 80)
    assert not any("benchmark" in line and "Mean" in line for line in lines)
    assert any(line.startswith("perfsuite: ") for line in lines)  # perfsuite's own summary stays
    if "PYTEST_XDIST_WORKER" in os.environ:  # pytest-benchmark turns itself off in an xdist worker's sessions
        return
    tables = run(project, *PERF_SESSION)  # without the flag: pytest-benchmark's tables, as before
    assert any("Mean" in line and "Median" in line for line in tables.outlines)
