"""The committed exact file is read field by field against the metric registry, refuses NaN and infinities,
keeps the per-op and per-dtype breakdown, and its gate fails a test it holds no values for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixed_fingerprint import FP as FIXED_FINGERPRINT

from perfsuite.core.results import Metric, Result
from perfsuite.errors import BaselineError
from perfsuite.judge.exact import ExactBaselines, check_exact, exact_breakdown, exact_values, stale_entries
from perfsuite.judge.verdict import Outcome

TEST_ID = "tests/perf/test_step.py::test_x"
GOOD = {
    "syncs_per_step": 0,
    "ops_per_step": 597,
    "amp_engaged": False,
    "amp_lowp_frac": 0.0,
    "input_format": "input float32 contiguous",
    "graph_breaks": None,
}


def write(directory: Path, tests: dict, **extra: object) -> Path:
    path = directory / "cpu__torch-2.13.json"
    body = {"schema_version": 2, "device": "cpu", "torch": "2.13", "tests": tests, **extra}
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("ops_per_step", "597", "= '597' must be a number"),
        ("ops_per_step", True, "= True must be a number"),
        ("ops_per_step", -1, "must be >= 0 (a count)"),
        ("amp_engaged", 1, "must be true or false (a flag)"),
        ("amp_lowp_frac", 1.5, "must lie within [0, 1] (a fraction)"),
        ("input_format", 3, "must be a string (a label)"),
        ("step_ms", 12.0, "is a timing metric; the committed file holds exact metrics only"),
        ("opz_per_step", 1, "is not a metric perfsuite knows"),
    ],
    ids=["string-count", "bool-count", "negative", "number-flag", "fraction", "number-label", "timing", "typo"],
)
def test_a_value_that_does_not_fit_its_metric_is_refused_naming_file_test_and_field(
    tmp_path: Path, field: str, value: object, said: str
) -> None:
    """Before: a string where a count belongs reached the verdict engine and raised a traceback there."""
    path = write(tmp_path, {TEST_ID: {**GOOD, field: value}})
    with pytest.raises(BaselineError) as info:
        ExactBaselines.open(tmp_path, "cpu__torch-2.13")
    message = str(info.value)
    assert str(path) in message and f"tests[{TEST_ID!r}][{field!r}]" in message and said in message
    assert "--perfsuite-update-exact" in message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinities_are_refused(tmp_path: Path, constant: str) -> None:
    """Before: NaN was accepted and then judged "better than the committed value"."""
    path = write(tmp_path, {TEST_ID: GOOD})
    path.write_text(path.read_text().replace('"ops_per_step": 597', f'"ops_per_step": {constant}'))
    with pytest.raises(BaselineError, match=f"{constant} is not a number JSON allows"):
        ExactBaselines.open(tmp_path, "cpu__torch-2.13")


def _result(ops: float, by: dict[str, float], syncs: float = 0.0) -> Result:
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={
            "ops_per_step": Metric("ops_per_step", ops, "ops/step", detail={"by": by}),
            "syncs_per_step": Metric("syncs_per_step", syncs, "syncs/step"),
            "h2d_bytes_per_step": Metric("h2d_bytes_per_step", 64.0, "bytes/step", detail={"by": {"uint8": 64.0}}),
        },
        samples={},
        fingerprint=FIXED_FINGERPRINT,
        batch_size=2,
        steps=2,
        warmup=0,
    )


def test_the_breakdown_is_stored_and_a_failure_names_what_moved(tmp_path: Path) -> None:
    """Before: per-op counts were not stored, so a failure listed the most frequent ops, not what moved."""
    store = ExactBaselines(tmp_path, "cpu__torch-2.13")
    base = _result(10.0, {"aten::addmm": 2.0, "aten::relu": 8.0})
    store.record(TEST_ID, exact_values(base), exact_breakdown(base))
    saved = json.loads(store.save().read_text())
    assert saved["schema_version"] == 2
    assert saved["tests"][TEST_ID] == {"h2d_bytes_per_step": 64, "ops_per_step": 10, "syncs_per_step": 0}  # ints
    assert saved["breakdown"][TEST_ID] == {
        "h2d_bytes_per_step": {"uint8": 64},
        "ops_per_step": {"aten::addmm": 2, "aten::relu": 8},
    }
    again = ExactBaselines.open(tmp_path, "cpu__torch-2.13")
    head = _result(14.0, {"aten::addmm": 2.0, "aten::relu": 8.0, "aten::copy_": 4.0})
    [syncs, ops, h2d] = check_exact(
        again.expected(TEST_ID),
        head,
        TEST_ID,
        again.display,
        "pytest x --perfsuite-update-exact",
        again.expected_breakdown(TEST_ID),
    )
    assert ops.outcome is Outcome.REGRESSED and syncs.outcome is h2d.outcome is Outcome.UNCHANGED
    assert "ops_per_step 10 -> 14 (exact, " in ops.message and "aten::copy_ 0 -> 4" in ops.message
    assert "`pytest x --perfsuite-update-exact`" in ops.message


def test_a_test_missing_from_the_file_fails_unless_allowed() -> None:
    """Before: it passed as new under --perfsuite-compare, so deleting an entry switched its gate off."""
    head = _result(10.0, {})
    [verdict] = check_exact(None, head, TEST_ID, "baselines/exact/f.json", "pytest --perfsuite-update-exact")
    assert verdict.outcome is Outcome.FAIL and verdict.failed
    assert (
        "no committed exact values for this test" in verdict.message and "--perfsuite-update-exact" in verdict.message
    )
    [allowed] = check_exact(None, head, TEST_ID, "f.json", allow_missing=True)
    assert allowed.outcome is Outcome.NEW


def test_a_value_no_count_can_be_fails_instead_of_improving() -> None:
    """A Metric refuses NaN and infinities itself; a negative count (a probe's bug) gets this far."""
    head = _result(-3.0, {})
    verdicts = {v.metric: v for v in check_exact({"ops_per_step": 10, "syncs_per_step": 0}, head, TEST_ID, "f")}
    assert verdicts["ops_per_step"].outcome is Outcome.FAIL and "must be >= 0" in verdicts["ops_per_step"].message


def test_recording_a_nan_is_refused(tmp_path: Path) -> None:
    store = ExactBaselines(tmp_path, "cpu__torch-2.13")
    with pytest.raises(BaselineError, match="ops_per_step = nan must be finite"):
        store.record(TEST_ID, {"ops_per_step": float("nan")})
    assert not store.changed


def test_a_schema_1_file_is_still_read(tmp_path: Path) -> None:
    path = write(tmp_path, {TEST_ID: GOOD})
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": 1}))
    assert ExactBaselines.open(tmp_path, "cpu__torch-2.13").expected(TEST_ID) == GOOD


def test_stale_entries_are_tests_that_no_longer_exist(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    committed = [
        "tests/test_a.py::test_kept",
        "tests/test_a.py::test_kept#label",
        "tests/test_a.py::test_renamed",
        "tests/test_gone.py::test_x",
        "tests/test_other.py::test_y",  # not collected in this session: said nothing about
    ]
    (tmp_path / "tests" / "test_other.py").write_text("")
    collected = {"tests/test_a.py::test_kept"}
    assert stale_entries(committed, collected, tmp_path) == [
        "tests/test_a.py::test_renamed",
        "tests/test_gone.py::test_x",
    ]
    # a session that selected one test of the file by node id says nothing about the file's other tests
    assert stale_entries(committed, collected, tmp_path, partial_files={"tests/test_a.py"}) == [
        "tests/test_gone.py::test_x"
    ]
    store = ExactBaselines(tmp_path, "k")
    store.record("tests/test_gone.py::test_x", {"ops_per_step": 1})
    store.changed = False
    assert store.remove(["tests/test_gone.py::test_x", "nothing"]) == ["tests/test_gone.py::test_x"] and store.changed
