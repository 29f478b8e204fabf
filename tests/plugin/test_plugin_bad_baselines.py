"""A malformed baseline file is an error for its test that names the file and the field; the test's other
verdicts stay in the report, and --perfsuite-compare --perfsuite-save replaces the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from perfsuite_pytester import baseline_files, read_json, report_results, run

pytest_plugins = ["pytester"]

TEST = """
    import pytest

    @pytest.mark.perf(max_syncs_per_step=0)
    def test_loader(perf_run):
        perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
"""


def _edit(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        change(data)
        path.write_text(json.dumps(data), encoding="utf-8")

    return apply


def _set_metric(name: str, value: object) -> Callable[[dict], None]:
    return lambda d: d["result"]["metrics"].__setitem__(name, value)


def _nan_sample(d: dict) -> None:
    d["result"]["samples"]["step_ms"][0] = float("nan")


def _string_value(d: dict) -> None:
    d["result"]["metrics"]["step_ms"]["value"] = "fast"


def _inf_counter(d: dict) -> None:
    d["result"]["metrics"]["syncs_per_step"] = {"value": float("inf"), "unit": "", "reason": None, "detail": {}}


def _huge_int(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"steps": ', '"steps": ' + "9" * 5000 + ', "x": ', 1), encoding="utf-8")


CASES = {
    "binary": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe"), "is not UTF-8 text"),
    "nan-sample": (_edit(_nan_sample), "NaN is not a JSON number"),
    "number-for-object": (_edit(_set_metric("step_ms", 3.5)), "field 'result.metrics.step_ms' is 3.5"),
    "string-for-number": (_edit(_string_value), "field 'result.metrics.step_ms.value' is 'fast'"),
    "inf-counter": (_edit(_inf_counter), "Infinity is not a JSON number"),
    "5000-digit-integer": (_huge_int, "is not valid JSON"),
}


# Three kinds in the inner loop; the rest are `slow` (two inner sessions each).
FAST_CASES = ("binary", "number-for-object", "5000-digit-integer")


@pytest.mark.parametrize("case", [c if c in FAST_CASES else pytest.param(c, marks=pytest.mark.slow) for c in CASES])
def test_a_malformed_baseline_fails_its_test_naming_file_and_field_and_keeps_other_verdicts(project, case):
    corrupt, message = CASES[case]
    project.makepyfile(TEST)
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    [path] = baseline_files(project.path)
    corrupt(path)
    broken = path.read_bytes()

    out = run(project, "--perfsuite-compare", "--perfsuite-allow-missing-exact", "--perfsuite-report-json", "v.json")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines([f"*baseline error: baseline {path}*"])
    assert message in out.stdout.str()
    assert "Traceback" not in out.stdout.str()
    verdicts = report_results(project.path / "v.json")
    # the threshold's verdict is kept, and so is the exact gate's (no committed exact file here: new)
    assert [(v["metric"], v["outcome"]) for v in verdicts] == [("syncs_per_step", "pass"), ("exact", "new")]
    assert path.read_bytes() == broken  # comparing alone never rewrites it


@pytest.mark.slow
def test_compare_with_save_replaces_a_malformed_baseline(project):
    project.makepyfile(TEST)
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    [path] = baseline_files(project.path)
    _edit(_set_metric("step_ms", 3.5))(path)
    replaced = run(project, "--perfsuite-compare", "--perfsuite-save", "--perfsuite-allow-missing-exact")
    replaced.assert_outcomes(failed=1)  # the comparison could not happen: said, not passed over
    replaced.stdout.fnmatch_lines(
        ["*field 'result.metrics.step_ms' is 3.5*--perfsuite-save replaces it*", "saved 1 baseline(s) under *"]
    )
    assert read_json(path)["result"]["metrics"]["step_ms"]["unit"] == "ms"  # a readable baseline again
    run(project, "--perfsuite-compare", "--perfsuite-factor", "50", "--perfsuite-allow-missing-exact").assert_outcomes(
        passed=1
    )
