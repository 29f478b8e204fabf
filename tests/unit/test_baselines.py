"""BaselineStore: atomic save and load, overwrite permission, corrupt files, fingerprints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from fixed_fingerprint import FP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.core.results import Metric, Result
from perfsuite.errors import BaselineError
from perfsuite.judge.baselines import BaselineStore, read_baseline_file, safe_filename

OTHER = dataclasses.replace(FP, gpu_model="NVIDIA H100 80GB HBM3", cuda="12.4", device="cuda")
TEST_ID = "tests/perf/test_x.py::test_a[cpu-2]"
DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def make_result(fingerprint=FP, step_ms=(10.0, 11.0, 9.5)) -> Result:
    return Result(
        workload="w",
        scale="smoke",
        knobs={"num_workers": 2},
        metrics={"syncs_per_step": Metric("syncs_per_step", 0)},
        samples={"step_ms": list(step_ms)},
        fingerprint=fingerprint,
        batch_size=8,
        steps=len(step_ms),
        warmup=1,
        created="2025-01-01T00:00:00+00:00",
    )


def test_path_is_under_fingerprint_key_with_a_safe_name(tmp_path):
    path = BaselineStore(tmp_path).path_for(FP, TEST_ID)
    assert path.parent == tmp_path / FP.key()
    assert path.name.startswith("tests.perf.test_x.py__test_a_cpu-2_-") and path.suffix == ".json"


@given(st.text(min_size=1, max_size=300))
def test_safe_filename_is_one_safe_component_and_distinct(test_id):
    name = safe_filename(test_id)
    assert "/" not in name and "\\" not in name and not name.startswith(".") and len(name) < 140
    assert name != safe_filename(test_id + "x")


def test_save_then_load_round_trips(tmp_path):
    store = BaselineStore(tmp_path)
    path = store.save(make_result(), TEST_ID)
    assert store.load(FP, TEST_ID) == make_result()
    assert json.loads(path.read_text())["test_id"] == TEST_ID
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step_ms=st.lists(st.floats(0.001, 1e6), min_size=1, max_size=50), test_id=st.text(min_size=1, max_size=80))
def test_round_trip_any_samples_and_ids(tmp_path, step_ms, test_id):
    store = BaselineStore(tmp_path)
    store.save(make_result(step_ms=step_ms), test_id, overwrite=True)
    assert store.load(FP, test_id) == make_result(step_ms=step_ms)


def test_no_overwrite_without_permission(tmp_path):
    store = BaselineStore(tmp_path)
    store.save(make_result(), TEST_ID)
    with pytest.raises(BaselineError, match="already exists.*--perfsuite-save.*nox -s baseline"):
        store.save(make_result(step_ms=(1.0,)), TEST_ID)
    assert store.load(FP, TEST_ID) == make_result()
    store.save(make_result(step_ms=(1.0,)), TEST_ID, overwrite=True)
    assert store.load(FP, TEST_ID).samples["step_ms"] == [1.0]
    assert len(list(store.path_for(FP, TEST_ID).parent.iterdir())) == 1


def test_missing_is_none(tmp_path):
    assert BaselineStore(tmp_path).load(FP, TEST_ID) is None
    assert BaselineStore(tmp_path / "nowhere").load_any(TEST_ID) is None


@pytest.mark.parametrize(
    "content,match",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a baseline file"),
        ('{"schema_version": 99, "test_id": "x", "result": {}}', "schema_version=99"),
        ('{"schema_version": 1, "test_id": "x", "result": {"schema_version": 1}}', "unreadable result"),
    ],
    ids=["syntax", "not-object", "schema", "result"],
)
def test_corrupt_file_error_names_the_path(tmp_path, content, match):
    store = BaselineStore(tmp_path)
    path = store.path_for(FP, TEST_ID)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(BaselineError, match=match) as info:
        store.load(FP, TEST_ID)
    assert str(path) in str(info.value)


def test_file_for_another_test_or_machine_is_refused(tmp_path):
    store = BaselineStore(tmp_path)
    saved = store.save(make_result(), "tests/perf/test_x.py::test_b")
    moved = store.path_for(FP, TEST_ID)
    saved.rename(moved)
    with pytest.raises(BaselineError, match="belongs to test 'tests/perf/test_x.py::test_b'"):
        store.load(FP, TEST_ID)
    misplaced = store.path_for(OTHER, TEST_ID)
    misplaced.parent.mkdir()
    store.save(make_result(), TEST_ID, overwrite=True).rename(misplaced)
    with pytest.raises(BaselineError, match="sits under"):
        store.load(OTHER, TEST_ID)


def test_load_any_finds_a_baseline_from_another_fingerprint(tmp_path):
    store = BaselineStore(tmp_path)
    store.save(make_result(OTHER), TEST_ID)
    assert store.load(FP, TEST_ID) is None
    assert store.load_any(TEST_ID).fingerprint == OTHER


def test_entries_list_keys_and_ids(tmp_path):
    store = BaselineStore(tmp_path)
    store.save(make_result(), "t::b")
    store.save(make_result(), "t::a")
    store.save(make_result(OTHER), "t::a")
    assert [(e.key, e.test_id) for e in store.entries()] == sorted(
        [(FP.key(), "t::a"), (FP.key(), "t::b"), (OTHER.key(), "t::a")]
    )
    assert [e.test_id for e in store.entries(OTHER.key())] == ["t::a"]
    assert BaselineStore(tmp_path / "none").entries() == []


def test_golden_baseline_file_reads():
    test_id, result = read_baseline_file(DATA / "baseline_file.json")
    assert test_id == "tests/perf/test_loader.py::test_gray[cpu-2]"
    assert len(result.samples["step_ms"]) == 30 and result.value("syncs_per_step") == 0
