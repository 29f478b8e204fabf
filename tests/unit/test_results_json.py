"""Strict reading of Result JSON: every malformed field is named, with what it must be."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perfsuite.core.results import Metric, Result
from perfsuite.errors import ResultError

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
BASE = json.loads((DATA / "base.json").read_text(encoding="utf-8"))


def test_an_infinite_counter_is_refused() -> None:
    with pytest.raises(ResultError, match="syncs_per_step.*is inf"):
        Metric("syncs_per_step", math.inf)


def test_the_reference_files_still_read_and_round_trip() -> None:
    result = Result.from_dict(BASE)
    assert Result.from_json(result.to_json()) == result


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"metrics": {"step_ms": 3.5}}, "field 'metrics.step_ms' is 3.5 (float)", id="number-for-object"),
        pytest.param(
            {"metrics": {"step_ms": {"value": "9.9"}}},
            "field 'metrics.step_ms.value' is '9.9' (a string)",
            id="string-for-number",
        ),
        pytest.param({"metrics": {"syncs_per_step": {"value": -1}}}, "must be a count >= 0", id="negative-count"),
        pytest.param({"metrics": {"amp_engaged": {"value": 1}}}, "must be true, false or null", id="int-for-bool"),
        pytest.param(
            {"metrics": {"step_ms": {"value": None}}}, "saying why the metric is unavailable", id="null-without-reason"
        ),
        pytest.param({"samples": {"step_ms": [1.0, "2"]}}, "field 'samples.step_ms[1]'", id="string-sample"),
        pytest.param({"batch_size": True}, "field 'batch_size' is True", id="bool-for-int"),
        pytest.param({"steps": 10**30}, "an integer of 31 digits", id="huge-int"),
        pytest.param({"fingerprint": {"device": "cpu"}}, "field 'fingerprint.gpu_model' is missing", id="fingerprint"),
        pytest.param({"colour": "red"}, "unknown field(s) 'colour'", id="unknown-field"),
        pytest.param({"notes": "one"}, "field 'notes' is 'one'", id="notes-string"),
    ],
)
def test_each_malformed_field_is_named(change: dict, message: str) -> None:
    data = json.loads(json.dumps(BASE))
    for key, value in change.items():
        if isinstance(value, dict) and key == "metrics":
            for name, metric in value.items():
                data["metrics"][name] = (
                    {**data["metrics"].get(name, {}), **metric} if isinstance(metric, dict) else metric
                )
        else:
            data[key] = value
    with pytest.raises(ResultError) as info:
        Result.from_dict(data)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "text", ['{"a": NaN}', '{"a": -Infinity}', "[" * 100_000, '{"steps": ' + "9" * 5000 + "}", b"\xff\xfe\x00"]
)
def test_json_that_is_not_strict_json_is_a_result_error(text: str | bytes) -> None:
    with pytest.raises(ResultError):
        Result.from_json(text)
