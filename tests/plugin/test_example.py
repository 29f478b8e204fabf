"""The documented way to measure one's own workload (examples/own_workload) works end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from perfsuite_pytester import FAST

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_workload"


@pytest.mark.slow
def test_the_example_workload_runs_saves_and_compares(project, tmp_path):
    stored = tmp_path / "baselines"
    args = (
        *FAST,
        str(EXAMPLE),
        f"--perfsuite-baselines={stored}",
        f"--perfsuite-exact-dir={stored / 'exact'}",  # the timing option never moves the committed exact file
        "--rootdir",
        str(EXAMPLE),
    )
    saved = project.runpytest_inprocess(*args, "--perfsuite-save", "--perfsuite-update-exact")
    saved.assert_outcomes(passed=6)  # 2 perf tests, 4 contract checks (test_contract.py)
    exact = list((stored / "exact").glob("*.json"))
    assert [p.name for p in exact] == ["cpu__torch-" + exact[0].name.split("torch-")[1]]
    assert len(list(stored.rglob("*.json"))) == 2 + 1  # two timing baselines, one committed exact file
    # A generous factor: this checks the wiring, and a busy machine must not turn it into a timing test.
    compared = project.runpytest_inprocess(*args, "--perfsuite-compare", "--perfsuite-factor", "50", "-v")
    compared.assert_outcomes(passed=6)
    out = compared.stdout.str()
    summary = out.split("= perfsuite =")[1]
    assert "test_defects_gpu_aug" in out and "syncs_per_step" in out
    # Every metric has its baseline, unless the saved run could not measure it (a speed of light that a
    # neighbour slowed leaves input_efficiency and loader_headroom unavailable, with the reason): then "new".
    # Each row is "metric base head ratio verdict" under its test id.
    new = {line.split()[0] for line in summary.splitlines() if line.rstrip().endswith("  new")}
    assert new <= unmeasured(stored), summary
    gate = " ".join(summary.split())  # the plugin folds its lines to the terminal's width
    assert "exact checks held against committed baselines" in gate and "0 tests with no timing baseline" in gate


def unmeasured(stored: Path) -> set[str]:
    """Metrics that some saved timing baseline holds as unavailable."""
    import json

    names = set()
    for path in stored.rglob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        for run in [data.get("result"), *(data.get("runs") or [])]:
            for name, metric in ((run or {}).get("metrics") or {}).items():
                if isinstance(metric, dict) and metric.get("value") is None:
                    names.add(name)
    return names
