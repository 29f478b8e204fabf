"""The documented way to measure one's own workload (examples/own_workload) works end to end."""

from __future__ import annotations

from pathlib import Path

from perfsuite_pytester import FAST

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_workload"


def test_the_example_workload_runs_saves_and_compares(project, tmp_path):
    stored = tmp_path / "baselines"
    args = (*FAST, str(EXAMPLE), "--perfsuite-baselines", str(stored), "--rootdir", str(EXAMPLE))
    saved = project.runpytest_inprocess(*args, "--perfsuite-save")
    saved.assert_outcomes(passed=6)  # 2 perf tests, 4 contract checks (test_contract.py)
    assert len(list(stored.rglob("*.json"))) == 2
    # A generous factor: this checks the wiring, and a busy machine must not turn it into a timing test.
    compared = project.runpytest_inprocess(*args, "--perfsuite-compare", "--perfsuite-factor", "50", "-v")
    compared.assert_outcomes(passed=6)
    out = compared.stdout.str()
    assert "test_defects_gpu_aug" in out and "syncs_per_step" in out and "new" not in out.split("= perfsuite =")[1]
