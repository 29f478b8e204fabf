"""Checks at start-up rather than after every test has run."""

from __future__ import annotations

import pytest

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
