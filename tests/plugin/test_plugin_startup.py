"""Checks at start-up rather than after every test has run; perfsuite without pytest-benchmark."""

from __future__ import annotations

import pytest
from perfsuite_pytester import read_json, run

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--perfsuite-report-md", "."), "--perfsuite-report-md *: is a directory*", id="md-is-a-dir"),
        pytest.param(
            ("--perfsuite-report-json", "afile/v.json"),
            "*afile is a file, so no directory can be made*",
            id="json-under-a-file",
        ),
        pytest.param(("--perfsuite-png", "afile/sub/c.png"), "*afile is a file*", id="png-under-a-file"),
    ],
)
def test_an_unwritable_report_path_is_a_usage_error_before_any_test_runs(pytester, args, message):
    pytester.makepyfile("def test_nothing(): pass")
    pytester.path.joinpath("afile").write_text("")
    out = pytester.runpytest_inprocess("-p", "perfsuite", *args)
    assert out.ret == pytest.ExitCode.USAGE_ERROR  # was: every test ran, then sessionfinish crashed
    out.stderr.fnmatch_lines([f"ERROR: perfsuite: {message}"])
    assert "test_nothing" not in out.stdout.str()


def test_perf_tests_run_and_are_judged_without_pytest_benchmark(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_loader(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0)
    """)
    out = run(project, "-p", "no:benchmark", "--perfsuite-report-json", "v.json")
    out.assert_outcomes(passed=1)
    assert [v["outcome"] for v in read_json(project.path / "v.json")] == ["pass"]


def test_a_run_that_times_out_fails_its_test_with_the_stacks_and_the_session_goes_on(project):
    project.makeconftest(
        project.path.joinpath("conftest.py").read_text()
        + """

import perfsuite.runner
from perfsuite.errors import RunTimeout

_real_run = perfsuite.runner.run


def _hangs_once(spec, probes=None):
    if spec.knobs.loader.num_workers == 1:
        raise RunTimeout("the window phase passed the deadline of 3.0 s: waiting on DataLoader worker 0 "
                         "(pid 4242).\\nPython stacks at expiry:\\n  File \\"data.py\\", line 9 in __getitem__",
                         "window", 3.0, (4242,), "stacks")
    return _real_run(spec, probes)


perfsuite.runner.run = _hangs_once
"""
    )
    project.makepyfile("""
        def test_hangs(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=1)

        def test_next(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0)
    """)
    out = run(project, "-p", "no:benchmark")
    out.assert_outcomes(failed=1, passed=1)
    out.stdout.fnmatch_lines(
        ["*perfsuite: the window phase passed the deadline*worker 0 (pid 4242)*", "*line 9 in __getitem__*"]
    )
    assert "Traceback" not in out.stdout.str()
