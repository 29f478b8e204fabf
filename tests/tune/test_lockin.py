"""Locking a tuning in: the prediction bounds, the tune file, and pyproject.toml kept as it was around them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scipy.stats import t

from perfsuite.plugin import settings
from perfsuite.tools.tune import TuneError
from perfsuite.tools.tune.lockin import TUNED_KEY, thresholds_from, write_thresholds, write_tune_file
from perfsuite.tools.tune.records import RunRecord

SPEEDS = [100.0, 110.0, 90.0, 105.0, 95.0, 101.0]
WAITS = [0.10, 0.12, 0.08, 0.11, 0.09, 0.10]


def runs(speeds=SPEEDS, waits=WAITS) -> list[RunRecord]:
    return [RunRecord(knobs={}, samples_per_s=s, data_wait_frac=w) for s, w in zip(speeds, waits)]


def test_min_samples_per_s_is_the_lower_99_percent_prediction_bound_of_one_run() -> None:
    bounds, notes = thresholds_from(runs())
    logs = [math.log(x) for x in SPEEDS]
    n, mean = len(logs), sum(logs) / len(logs)
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1))
    exact = math.exp(mean - t.ppf(0.99, n - 1) * sd * math.sqrt(1 + 1 / n))
    assert exact * 0.999 <= bounds["min_samples_per_s"] <= exact  # rounded down, 4 digits
    assert bounds["min_samples_per_s"] < min(SPEEDS)  # a bound for one run lies below the runs it came from
    assert notes == []


def test_max_data_wait_frac_is_the_upper_bound_and_never_one() -> None:
    bounds, _ = thresholds_from(runs())
    assert max(WAITS) < bounds["max_data_wait_frac"] < 0.2
    spread, notes = thresholds_from(runs(waits=[0.1, 0.9, 0.2, 0.95, 0.5, 0.3]))
    assert "max_data_wait_frac" not in spread and "reaches 1" in notes[0]


def test_too_few_runs_give_no_thresholds_and_say_so() -> None:
    bounds, notes = thresholds_from(runs(SPEEDS[:2], WAITS[:2]))
    assert bounds == {} and "2 successful run(s)" in notes[0]


PYPROJECT = """\
[project]
name = "users-project"  # a comment that must survive
dependencies = ["torch"]

[tool.ruff]
line-length = 100

[tool.perfsuite]
# the team's own settings
scale = "smoke"

[tool.perfsuite.thresholds.cpu]
max_syncs_per_step = 0
"""


def test_thresholds_are_written_where_the_plugin_reads_them_and_the_rest_of_the_file_stays(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT)
    where = write_thresholds(
        path,
        "cpu",
        "tests/perf/test_x.py::test_y[a-b]",
        {"min_samples_per_s": 95.5},
        {"num_workers": 2},
        "f.json",
        False,
    )
    text = path.read_text()
    assert all(line in text.splitlines() for line in PYPROJECT.splitlines())  # nothing else changed
    assert '"tests/perf/test_x.py::test_y[a-b]"' in where
    table = settings.read_pyproject(tmp_path)
    resolved = settings.resolve({}, table, tmp_path, tmp_path)
    nodeid = "tests/perf/test_x.py::test_y[a-b]"
    bounds = settings.machine_thresholds(resolved, "cpu", "test_y[a-b]", nodeid)
    assert bounds == {"max_syncs_per_step": 0, "min_samples_per_s": 95.5}
    assert settings.machine_tuned(resolved, "cpu", "test_y[a-b]", nodeid) == {"num_workers": 2}
    assert settings.machine_tuned(resolved, "cpu", "test_other", "tests/perf/test_x.py::test_other") == {}
    assert "perfsuite tune: f.json" in text


def test_earlier_bounds_are_replaced_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    write_thresholds(path, "cpu", "test_t", {"min_samples_per_s": 10.0}, {"num_workers": 2}, "a", False)
    write_thresholds(path, "cpu", "test_t", {"min_samples_per_s": 10.0}, {"num_workers": 2}, "a", False)  # same: fine
    with pytest.raises(TuneError, match=r"already bounds 'test_t' on 'cpu' \(min_samples_per_s = 10.0\); pass --force"):
        write_thresholds(path, "cpu", "test_t", {"min_samples_per_s": 20.0}, {"num_workers": 2}, "b", False)
    write_thresholds(path, "cpu", "test_t", {"min_samples_per_s": 20.0}, {"num_workers": 4}, "b", True)
    resolved = settings.resolve({}, settings.read_pyproject(tmp_path), tmp_path, tmp_path)
    assert settings.machine_thresholds(resolved, "cpu", "test_t", "test_t") == {"min_samples_per_s": 20.0}
    assert settings.machine_tuned(resolved, "cpu", "test_t", "test_t") == {"num_workers": 4}


def test_a_pyproject_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool\n")
    with pytest.raises(TuneError, match="not valid TOML"):
        write_thresholds(path, "cpu", "t", {"min_samples_per_s": 1.0}, {}, "a", False)
    assert path.read_text() == "[tool\n"


def test_the_tune_file_is_never_replaced_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "key" / "face_parsing.json"
    write_tune_file(path, {"chosen": {"num_workers": 2}}, overwrite=False)
    with pytest.raises(TuneError, match="exists .* pass --force"):
        write_tune_file(path, {"chosen": {"num_workers": 4}}, overwrite=False)
    assert '"num_workers": 2' in path.read_text()
    write_tune_file(path, {"chosen": {"num_workers": 4}}, overwrite=True)
    assert '"num_workers": 4' in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == ["face_parsing.json"]  # no temporary left behind


def test_the_plugin_and_the_writer_agree_on_the_tuned_key() -> None:
    assert TUNED_KEY == settings.TUNED_KEY


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["amp=bf16"], "NAME one of num_workers"),
        (["num_workers"], "write NAME=VALUE"),
        (["num_workers=two"], "num_workers takes int"),
        (["pin_memory=1"], "pin_memory takes true or false"),
    ],
    ids=["step-knob", "no-value", "not-int", "not-bool"],
)
def test_bad_knob_overrides_say_what_to_write(items, message) -> None:
    with pytest.raises(settings.PerfsuiteError, match=message):
        settings.parse_knob_overrides(items)


def test_knob_overrides_parse_to_knob_values() -> None:
    parsed = settings.parse_knob_overrides(["num_workers=4", "pin_memory=true", "prefetch_factor=none"])
    assert parsed == {"num_workers": 4, "pin_memory": True, "prefetch_factor": None}


def test_a_tuned_entry_that_is_not_a_table_of_values_is_refused(tmp_path: Path) -> None:
    with pytest.raises(settings.PerfsuiteError, match="must be a table of knob values"):
        settings.resolve({}, {"thresholds": {"cpu": {TUNED_KEY: 3}}}, tmp_path, tmp_path)
