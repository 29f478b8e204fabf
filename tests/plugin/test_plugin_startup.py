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
