"""--perfsuite-save / --perfsuite-compare end to end: round trip, regressions, refusals, corruption, no overwrites."""

from __future__ import annotations

import json

import pytest
from perfsuite_pytester import baseline_files, read_json, report_results, run, unfolded

from perfsuite.core.results import Fingerprint

pytest_plugins = ["pytester"]

# These tests check the wiring, not timings: a busy machine must not make step_ms regress.
LENIENT = ("--perfsuite-factor", "50")
# Where the committed exact values are not what a test is about.
ALLOW = ("--perfsuite-allow-missing-exact",)

TEST = """
    import pytest

    @pytest.mark.perf(max_syncs_per_step=0)
    def test_loader(perf_run):
        perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
"""


@pytest.mark.slow
def test_save_then_compare_round_trips_and_only_saving_writes(project):
    project.makepyfile(TEST)
    missing = run(project, "--perfsuite-compare")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR  # gating against nothing must not pass silently
    missing.stderr.fnmatch_lines([f"*the baselines directory {project.path / 'baselines'} does not exist*"])
    (project.path / "baselines").mkdir()
    first = run(project, "--perfsuite-compare", *ALLOW, "--perfsuite-report-json", "v.json")
    first.assert_outcomes(passed=1)
    unfolded(first).fnmatch_lines(
        [
            "*1 test new: no committed exact values in*",  # counted, each reason on its line, not as rows of '-'
            "*1 test new: first run on this machine: no timing baseline yet*",
            "*2 new, 1 pass*",
            "*0 exact checks held against committed baselines; no committed exact file applies to this run "
            "(*cpu__torch-*.json does not exist); 1 test result(s) with no committed exact values (reported as new);"
            " 1 test with no timing baseline on this machine*",
        ]
    )
    assert baseline_files(project.path) == []  # comparing never writes a baseline
    assert {v["outcome"] for v in report_results(project.path / "v.json")} == {"new", "pass"}

    saved = run(project, "--perfsuite-save")
    saved.assert_outcomes(passed=1)
    saved.stdout.fnmatch_lines(["saved 1 baseline(s) under *baselines"])
    [path] = baseline_files(project.path)
    stored = read_json(path)
    assert stored["test_id"].endswith("::test_loader")
    assert path.parent.name == Fingerprint(**stored["result"]["fingerprint"]).key()
    before = path.read_bytes()

    again = run(project, "--perfsuite-compare", *ALLOW, "--perfsuite-report-json", "v.json", *LENIENT)
    again.assert_outcomes(passed=1)
    outcomes = {v["metric"]: v["outcome"] for v in report_results(project.path / "v.json")}
    assert "timing" not in outcomes  # no longer new
    assert outcomes["step_ms"] in {
        "unchanged",
        "inconclusive",
        "improved",
        "regressed",
    }  # timing: not this test's concern
    assert outcomes["syncs_per_step"] == "unchanged"
    # no committed file: the exact metrics were judged against this machine's baseline, and the gate line says so
    unfolded(again).fnmatch_lines(["*exact checks held (0 against committed baselines, * against this machine's*"])
    assert path.read_bytes() == before and baseline_files(project.path) == [path]  # compared, not written

    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    assert path.read_bytes() != before  # saving, and only saving, replaces it


def test_compare_without_committed_exact_values_fails_with_the_command_that_writes_them(project):
    """Before: every exact check became `new` and the session passed with "0 exact checks held"."""
    project.makepyfile(TEST)
    (project.path / "baselines").mkdir()
    out = run(project, "--perfsuite-compare")
    out.assert_outcomes(failed=1)
    unfolded(out).fnmatch_lines(
        [
            "*no committed exact values for this test in *cpu__torch-*.json (no committed exact file for "
            "cpu__torch-*), so its exact gate would be off; record them with `*--perfsuite-update-exact`*",
            "*no committed exact file applies to this run*; 1 test result(s) with no committed exact values (failed)*",
            "perfsuite: record the exact values with `*pytest * --perfsuite-update-exact`",
        ]
    )


def _edit_baseline(path, edit):
    data = read_json(path)
    edit(data["result"])
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_regression_against_the_baseline_fails_with_the_cause(project, monkeypatch):
    # The judging is what is tested, beside the other test workers: wall-clock verdicts whatever the load.
    monkeypatch.setenv("PERFSUITE_WALL_BOUND", "1")
    project.makepyfile(TEST)
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    [path] = baseline_files(project.path)
    # A baseline a hundred times faster than anything this run can do: head must be judged regressed.
    _edit_baseline(path, lambda r: r["samples"].update(step_ms=[x / 100 for x in r["samples"]["step_ms"]]))
    out = run(project, "--perfsuite-compare")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(
        ["*test_loader: slow steps: step_ms median * -> * ms (x*slower by more than x1.2*", "*regressed*"]
    )


@pytest.mark.slow
def test_a_baseline_from_another_machine_is_no_baseline_here_unless_forced(project):
    """Timing baselines are per machine, and a repository may commit several (a GPU runner's beside a CPU's):
    another machine's is not compared with, and says so; --perfsuite-force compares with it."""
    project.makepyfile(TEST)
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    [path] = baseline_files(project.path)
    data = read_json(path)
    data["result"]["fingerprint"]["cpu_model"] = "Imaginary CPU 9000"
    other_key = Fingerprint(**data["result"]["fingerprint"]).key()
    moved = project.path / "baselines" / other_key / path.name
    moved.parent.mkdir()
    moved.write_text(json.dumps(data), encoding="utf-8")
    path.unlink()

    report = project.path / "report.json"
    new = run(project, "--perfsuite-compare", *ALLOW, f"--perfsuite-report-json={report}")
    new.assert_outcomes(passed=1)
    new.stdout.fnmatch_lines(["*1 test new: first run on this machine*"])
    [timing] = [v for v in read_json(report)["results"] if v["metric"] == "timing"]
    assert f"one from '{other_key}' is there" in timing["message"] and "--perfsuite-force" in timing["message"]
    forced = run(project, "--perfsuite-compare", "--perfsuite-force", *ALLOW, *LENIENT)
    forced.assert_outcomes(passed=1)
    assert "comparison refused" not in forced.stdout.str()
    summary = forced.stdout.str().split("= perfsuite =")[1]
    assert "first run on this machine" not in summary and "0 tests with no timing baseline" in summary


@pytest.mark.slow
def test_a_corrupt_baseline_is_an_error_naming_the_file(project):
    project.makepyfile(TEST)
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    [path] = baseline_files(project.path)
    path.write_text("{ not json", encoding="utf-8")
    out = run(project, "--perfsuite-compare", *ALLOW)
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines([f"*baseline error: baseline {path} is not valid JSON*"])
    assert path.read_text(encoding="utf-8") == "{ not json"  # left for a person to look at


@pytest.mark.slow
def test_baselines_option_and_pyproject_pick_the_directory(project):
    project.makepyfile(TEST)
    project.path.joinpath("pyproject.toml").write_text('[tool.perfsuite]\nbaselines = "perf/stored"\n')
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    assert len(list((project.path / "perf" / "stored").rglob("*.json"))) == 1
    run(project, "--perfsuite-save", "--perfsuite-baselines", "elsewhere").assert_outcomes(passed=1)
    assert len(list((project.path / "elsewhere").rglob("*.json"))) == 1


@pytest.mark.slow
def test_committed_exact_values_are_checked_both_ways_and_rewritten_only_when_asked(project):
    """The exact gate: held on every machine, an improvement fails too, with the command that updates it."""
    project.makepyfile(TEST)
    run(project, "--perfsuite-update-exact").assert_outcomes(passed=1)
    [exact] = sorted((project.path / "baselines" / "exact").glob("*.json"))
    data = read_json(exact)
    ((test_id, values),) = data["tests"].items()
    assert test_id.endswith("::test_loader") and values["syncs_per_step"] == 0 and values["ops_per_step"] > 0
    held = run(project, "--perfsuite-compare")
    held.assert_outcomes(passed=1)
    unfolded(held).fnmatch_lines(
        [
            f"*{len([v for v in values.values() if v is not None])} exact checks held against "
            "committed baselines*; 1 test with no timing baseline on this machine yet"
        ]
    )

    def rewrite(**changes):
        exact.write_text(json.dumps({**data, "tests": {test_id: {**values, **changes}}}), encoding="utf-8")

    rewrite(ops_per_step=values["ops_per_step"] + 10)  # the code now does fewer ops than committed: stale file
    better = run(project, "--perfsuite-compare")
    better.assert_outcomes(failed=1)
    better.stdout.fnmatch_lines(
        [
            "*ops_per_step * -> * (exact, baselines/exact/*): better than the committed "
            "value; commit it: `*pytest * --perfsuite-update-exact`*"
        ]
    )
    rewrite(h2d_bytes_per_step=1)  # the code now copies more than committed: a regression
    worse = run(project, "--perfsuite-compare")
    worse.assert_outcomes(failed=1)
    worse.stdout.fnmatch_lines(["*more bytes copied: h2d_bytes_per_step 1 -> *"])
    assert read_json(exact)["tests"][test_id]["h2d_bytes_per_step"] == 1  # checking never rewrites it


@pytest.mark.parametrize(
    "fault,evidence",
    [
        ("float64_inputs", "*more bytes copied: h2d_bytes_per_step * -> * (exact, *)*bytes by dtype now: float64 *"),
        (
            "print_loss",
            "*host syncs: syncs_per_step 0 -> 1 (exact, *)*__format__ (read) at *faults/catalog.py:*, 1 per step*",
        ),
    ],
)
@pytest.mark.slow
def test_a_work_changing_fault_fails_against_the_committed_exact_values(project, fault, evidence):
    project.makepyfile(TEST.replace("max_syncs_per_step=0", ""))
    run(project, "--perfsuite-update-exact").assert_outcomes(passed=1)
    out = run(project, "--perfsuite-compare", "--perfsuite-inject", fault, *LENIENT)
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines([evidence])
