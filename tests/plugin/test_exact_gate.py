"""The committed exact gate end to end: it cannot be switched off by where timing baselines live, it reports
stale entries, a damaged file fails with one line, and its line adds up under xdist."""

from __future__ import annotations

import json

import pytest
from perfsuite_pytester import FAST, read_json, run, unfolded

pytest_plugins = ["pytester"]

TEST = """
    import pytest

    @pytest.mark.perf(max_syncs_per_step=0)
    def test_loader(perf_run):
        perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
"""


def _exact_file(project: pytest.Pytester):
    [path] = sorted((project.path / "baselines" / "exact").glob("*.json"))
    return path


def test_timing_baselines_elsewhere_never_move_the_committed_exact_file_nor_the_test_ids(project, tmp_path_factory):
    """Before: --perfsuite-baselines DIR moved the exact file with it, every exact check became new and the
    session passed; the space form also moved pytest's rootdir, so ids changed with where baselines live."""
    project.makepyfile(TEST)
    run(project, "--perfsuite-update-exact").assert_outcomes(passed=1)
    committed = read_json(_exact_file(project))
    held = sum(v is not None for v in next(iter(committed["tests"].values())).values())
    elsewhere = tmp_path_factory.mktemp("other-baselines")
    out = run(project, "--perfsuite-compare", "--perfsuite-baselines", str(elsewhere))  # the space form
    out.assert_outcomes(passed=1)
    unfolded(out).fnmatch_lines(
        [
            f"perfsuite: {held} exact checks held against committed baselines (baselines/exact/cpu__torch-*.json); "
            "1 test with no timing baseline on this machine yet",
            "perfsuite: note: pytest's rootdir is *a perfsuite option's value (space form*",
        ]
    )
    assert "no committed exact values" not in out.stdout.str()


@pytest.mark.slow
def test_stale_entries_are_reported_and_update_exact_removes_them(project):
    project.makepyfile(TEST)
    run(project, "--perfsuite-update-exact").assert_outcomes(passed=1)
    path = _exact_file(project)
    data = read_json(path)
    [(test_id, values)] = data["tests"].items()
    gone = test_id.replace("test_loader", "test_renamed_long_ago")
    data["tests"][gone] = values
    path.write_text(json.dumps(data), encoding="utf-8")
    out = run(project, "--perfsuite-compare")
    out.assert_outcomes(passed=1)
    out.stdout.fnmatch_lines(
        [
            "perfsuite: 1 stale entry still in baselines/exact/*.json (tests that no longer exist): "
            f"{gone}; `*` removes them"
        ]
    )
    run(project, "--perfsuite-update-exact").stdout.fnmatch_lines(["*1 stale entry removed from*"])
    assert list(read_json(path)["tests"]) == [test_id]


def test_a_damaged_exact_file_fails_each_test_with_one_line_naming_file_test_and_field(project):
    project.makepyfile(TEST)
    run(project, "--perfsuite-update-exact").assert_outcomes(passed=1)
    path = _exact_file(project)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"syncs_per_step": 0', '"syncs_per_step": "none"', 1), encoding="utf-8")
    out = run(project, "--perfsuite-compare")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(
        [
            f"*baseline error: exact baselines {path}: tests[[]'*::test_loader'][[]'syncs_per_step'] = 'none' "
            "must be a number*"
        ]
    )
    assert "Traceback" not in out.stdout.str()


@pytest.mark.slow
def test_under_xdist_update_exact_writes_the_file_and_the_gate_line_counts_every_workers_checks(project):
    """Before: under -n 2 the workers' exact values were never written, and the gate line said 0 held."""
    project.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", range(4))
        def test_run(perf_run, n):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
        """
    )
    args = (*FAST, "-p", "xdist", "-n", "2")
    project.runpytest_subprocess(*args, "--perfsuite-update-exact", timeout=300).assert_outcomes(passed=4)
    committed = read_json(_exact_file(project))
    assert len(committed["tests"]) == 4
    held = sum(sum(v is not None for v in values.values()) for values in committed["tests"].values())
    out = project.runpytest_subprocess(*args, "--perfsuite-compare", timeout=300)
    out.assert_outcomes(passed=4)
    unfolded(out).fnmatch_lines(
        [f"perfsuite: {held} exact checks held against committed baselines (*); 4 tests with no timing baseline*"]
    )


def test_a_session_of_one_test_by_node_id_keeps_the_files_other_entries(project):
    """Selecting one test (file.py::test) says nothing about the file's other tests: not stale, not removed."""
    project.makepyfile(
        test_two="""
        def test_one(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)


        def test_other(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, batch_size=2)
        """
    )
    run(project, "--perfsuite-update-exact").assert_outcomes(passed=2)
    out = run(project, "test_two.py::test_one", "--perfsuite-update-exact")
    out.assert_outcomes(passed=1)
    assert "stale" not in out.stdout.str()
    assert sorted(t.split("::")[-1] for t in read_json(_exact_file(project))["tests"]) == ["test_one", "test_other"]
