"""pytest -n 2: one report holding every test, one summary from the controller, one GPU per worker."""

from __future__ import annotations

import pytest
from perfsuite_pytester import FAST, report_results

pytest.importorskip("xdist")
pytest_plugins = ["pytester"]

SIX = """
    import os

    import pytest

    @pytest.mark.perf(max_syncs_per_step=0)
    @pytest.mark.parametrize("n", range(6))
    def test_run(perf_run, n):
        perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)

    def test_device_env(request):
        # Where pytest -n put this test, and what CUDA_VISIBLE_DEVICES its worker got.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
        out = request.config.rootpath / f"env-{worker}.txt"
        out.write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
"""


def _run_n2(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    # Workers are subprocesses: they import this project's conftest, and find perfsuite on PYTHONPATH.
    return project.runpytest_subprocess(*FAST, "-p", "xdist", "-n", "2", *args, timeout=300)


@pytest.mark.slow
def test_n2_writes_one_report_with_every_test_and_one_summary(project: pytest.Pytester) -> None:
    project.makepyfile(SIX)
    out = _run_n2(
        project, "--perfsuite-report-json", "v.json", "--perfsuite-report-md", "v.md", "--perfsuite-worker-gpus", "5,7"
    )
    out.assert_outcomes(passed=7)
    verdicts = report_results(project.path / "v.json")
    assert sorted(v["test_id"].split("::")[-1] for v in verdicts) == [f"test_run[{n}]" for n in range(6)]
    assert all(v["outcome"] == "pass" for v in verdicts)
    assert all(f"test_run[{n}]" in (project.path / "v.md").read_text() for n in range(6))
    out.stdout.fnmatch_lines(["*= perfsuite =*", "perfsuite: *6 pass* (6 results)*"])
    envs = {p.name: p.read_text() for p in project.path.glob("env-gw*.txt")}
    assert set(envs.values()) <= {"5", "7"} and envs  # worker k got entry k of the list


@pytest.mark.slow
def test_more_workers_than_gpus_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makepyfile(SIX)
    out = _run_n2(project, "--perfsuite-worker-gpus", "3")
    out.stderr.fnmatch_lines(["*pytest -n 2 runs 2 workers but --perfsuite-worker-gpus 3 gives 1 GPU(s)*"])
    assert out.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in out.stderr.str()
