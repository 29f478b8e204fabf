"""Starvation predicted for a GPU runner: a run's loader supply against the runner's recorded demand.

The arithmetic is checked exactly on constructed Results (no timing): supply = processes x 1000 / (CPU ms per sample
scaled by the two hosts' calibration kernels), efficiency = min(1, supply / demand), serial loading between steps,
the runner's cores capping the processes, and every case where a side is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.judge.starvation import (
    DEMAND_KNOBS,
    DemandError,
    add_demands,
    load_demand,
    predict,
    prediction_metric,
    with_prediction,
)
from perfsuite.judge.thresholds import Predicted, check_thresholds, parse_thresholds
from perfsuite.judge.verdict import Outcome

STEP = {"aug": "cpu", "cutmix": 0.0, "mixup": 0.0, "amp": None, "compile": None, "channels_last": False}
STEP.update({"tf32": False, "cudnn_benchmark": False, "fused": False})


def gpu_fingerprint() -> Fingerprint:
    fp = Fingerprint.collect("cpu")
    return Fingerprint(**{**fp.__dict__, "device": "cuda", "gpu_model": "NVIDIA H200", "gpu_count": 1})


def result(
    *,
    device: str = "cpu",
    workers: int = 2,
    process_ms: float | None = 20.0,
    stages: dict[str, float] | None = None,
    calibration_ms: float = 2.0,
    sol: float | None = None,
    batch_ms: list[float] | None = None,
    scale: str = "full",
    usable_cores: int = 2,
) -> Result:
    stages = {"__getitem__": 4.0, "transform": 8.0} if stages is None else stages
    metrics = {
        "loader_cpu_ms_per_sample": Metric(
            "loader_cpu_ms_per_sample",
            sum(stages.values()),
            "ms/sample",
            detail={"by": stages, "calibration_ms": calibration_ms},
        ),
        "loader_process_cpu_ms_per_sample": (
            Metric("loader_process_cpu_ms_per_sample", process_ms, "ms/sample")
            if process_ms is not None
            else Metric.unavailable("loader_process_cpu_ms_per_sample", "no workers", "ms/sample")
        ),
        "loader_capacity_samples_per_s": Metric(
            "loader_capacity_samples_per_s", 1.0, "samples/s", detail={"usable_cores": usable_cores}
        ),
    }
    if sol is not None:
        metrics["input_efficiency"] = Metric(
            "input_efficiency", None, "fraction", "withheld", {"sol_samples_per_s": sol}
        )
    return Result(
        workload="face_parsing",
        scale=scale,
        knobs={**STEP, "num_workers": workers, "batch_size": None},
        metrics=metrics,
        samples={"loader_cpu_ms": batch_ms or []},
        fingerprint=gpu_fingerprint() if device == "cuda" else Fingerprint.collect("cpu"),
        batch_size=32,
        steps=12,
        warmup=2,
    )


@pytest.fixture
def demands(tmp_path: Path) -> Path:
    """A runner whose step consumes 400 and 440 samples/s, on a host whose calibration kernel takes 1 ms (16 cores)."""
    runs = [result(device="cuda", sol=400.0, calibration_ms=1.0, usable_cores=16)]
    runs.append(result(device="cuda", sol=440.0, calibration_ms=1.2, usable_cores=16))
    add_demands(runs, tmp_path, provenance="measured in a test")
    return tmp_path


def test_demand_knobs_are_the_step_s_not_the_loader_s():
    assert {"amp", "compile", "channels_last", "aug", "batch_size"} <= set(DEMAND_KNOBS)
    assert not {"num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "log_interval"} & set(
        DEMAND_KNOBS
    )


def test_supply_over_demand_with_the_hosts_calibrations(demands: Path):
    # 20 ms per sample here, where the kernel takes 2 ms; the runner's host runs it in 1 ms (the faster of its two
    # runs): 10 ms per sample there, over 2 workers = 200 samples/s against a median demand of 420.
    p = predict(result(), load_demand("nvidia-h200", demands))
    assert p.runner == "nvidia-h200" and p.processes == 2
    assert p.scale_to_runner == pytest.approx(0.5)
    assert p.supply_per_s == pytest.approx(200.0) and p.demand_per_s == pytest.approx(420.0)
    assert p.efficiency == pytest.approx(200.0 / 420.0)
    assert p.verdict == "starved" and p.decided
    assert p.low == pytest.approx(200.0 / 440.0) and p.high == pytest.approx(200.0 / 400.0)


def test_never_above_one_and_fed_when_supply_exceeds_demand(demands: Path):
    p = predict(result(workers=8, process_ms=2.0, stages={"__getitem__": 1.0}), load_demand("nvidia-h200", demands))
    assert p.supply_per_s == pytest.approx(8000.0) and p.efficiency == 1.0 and p.verdict == "fed"


def test_the_runner_s_cores_cap_the_worker_processes(tmp_path: Path):
    add_demands([result(device="cuda", sol=400.0, calibration_ms=2.0, usable_cores=4)], tmp_path)
    p = predict(result(workers=16), load_demand("nvidia-h200", tmp_path))
    assert p.processes == 4 and p.supply_per_s == pytest.approx(4 * 1000 / 20.0)


def test_no_workers_load_between_the_steps(demands: Path):
    # Serial: each sample costs 1/supply + 1/demand seconds, so efficiency = 1 / (1 + demand / supply).
    p = predict(result(workers=0, process_ms=None), load_demand("nvidia-h200", demands))
    supply = 1000 / (12.0 * 0.5)  # the stages alone (no worker process to read), at the runner's speed
    assert p.serial and p.supply_per_s == pytest.approx(supply)
    assert p.efficiency == pytest.approx(1 / (1 + 420.0 / supply))


def test_whole_process_time_below_its_own_stages_is_not_used(demands: Path):
    p = predict(result(process_ms=5.0), load_demand("nvidia-h200", demands))  # 5 < 12 ms of stages: not a reading
    assert p.supply_per_s == pytest.approx(2 * 1000 / (12.0 * 0.5))


def test_the_limiting_stage_or_the_workers_overhead(demands: Path):
    d = load_demand("nvidia-h200", demands)
    assert predict(result(process_ms=14.0), d).limiting.startswith("transform: 8 of 14 ms/sample")
    assert predict(result(process_ms=30.0), d).limiting.startswith("the workers' own overhead")


def test_the_range_comes_from_the_replayed_batches_and_both_demand_runs(demands: Path):
    p = predict(result(batch_ms=[11.0, 12.0, 13.0]), load_demand("nvidia-h200", demands))
    assert p.low < 200.0 / 440.0 < p.efficiency < 200.0 / 400.0 < p.high <= 1.0


@pytest.mark.parametrize(
    "case,expected",
    [
        ({"scale": "smoke"}, "no demand for face_parsing at scale smoke"),
        ({"stages": {}, "process_ms": None}, None),
    ],
)
def test_unavailable_names_what_is_missing(demands: Path, case: dict[str, Any], expected: str | None):
    r = result(**case)
    if expected is None:  # no ledger: the stages metric itself unavailable
        r.metrics["loader_cpu_ms_per_sample"] = Metric.unavailable("loader_cpu_ms_per_sample", "observe_steps=0")
        expected = "no loader supply in this run: the loader ledger did not run (observe_steps=0)"
    p = predict(r, load_demand("nvidia-h200", demands))
    assert isinstance(p, Metric) and not p.available and expected in str(p.reason)
    if "no demand" in expected:
        assert "perfsuite demand add" in str(p.reason)


def test_a_runner_without_a_demand_file_is_bad_input_naming_the_known_ones(demands: Path):
    with pytest.raises(DemandError, match="no demand recorded for runner 'nvidia-b200'.*runners with one: nvidia-h200"):
        load_demand("nvidia-b200", demands)
    with pytest.raises(DemandError, match="not a runner's name"):
        load_demand("../etc", demands)


def test_a_cpu_run_is_no_demand(tmp_path: Path):
    with pytest.raises(DemandError, match="ran on 'cpu'"):
        add_demands([result(sol=100.0)], tmp_path)


def test_a_measured_demand_replaces_a_provisional_one_and_runs_of_one_kind_add_up(tmp_path: Path):
    add_demands([result(device="cuda", sol=100.0, calibration_ms=1.0)], tmp_path, provenance="provisional: shared")
    add_demands([result(device="cuda", sol=110.0, calibration_ms=1.0)], tmp_path, provenance="provisional: again")
    (entry,) = load_demand("nvidia-h200", tmp_path).entries
    assert entry.sol_samples_per_s == (100.0, 110.0)
    add_demands([result(device="cuda", sol=130.0, calibration_ms=1.0)], tmp_path, provenance="")
    (entry,) = load_demand("nvidia-h200", tmp_path).entries
    assert entry.sol_samples_per_s == (130.0,) and not entry.provenance.startswith("provisional")
    add_demands([result(device="cuda", sol=90.0, calibration_ms=1.0)], tmp_path, provenance="provisional: late")
    (entry,) = load_demand("nvidia-h200", tmp_path).entries
    assert entry.sol_samples_per_s == (130.0,)  # a provisional demand never replaces a measured one


def test_a_damaged_demand_file_is_named(tmp_path: Path):
    (tmp_path / "nvidia-h200.json").write_text(json.dumps({"schema_version": 1, "entries": [{"workload": "x"}]}))
    with pytest.raises(DemandError, match="is not a demand file"):
        load_demand("nvidia-h200", tmp_path)


def test_the_prediction_travels_in_the_result(demands: Path):
    r = with_prediction(result(), predict(result(), load_demand("nvidia-h200", demands)))
    m = Result.from_dict(json.loads(r.to_json())).metric("predicted_input_efficiency")
    assert m.value == pytest.approx(200.0 / 420.0) and m.detail["verdict"] == "starved"
    assert m.detail["interval"] == [pytest.approx(200.0 / 440.0), pytest.approx(200.0 / 400.0)]


def test_a_marker_bound_on_input_efficiency_is_judged_on_the_prediction_away_from_the_runner(demands: Path):
    thresholds = parse_thresholds({"min_input_efficiency": 0.9, "predict_for": "nvidia-h200"})
    assert isinstance(thresholds[0], Predicted)
    r = with_prediction(result(), predict(result(), load_demand("nvidia-h200", demands)))
    (v,) = check_thresholds(r, "t", thresholds)
    assert v.outcome is Outcome.FAIL
    assert "predicted for nvidia-h200" in v.message and "limited by transform" in v.message
    fed = with_prediction(
        result(workers=8, process_ms=2.0, stages={"__getitem__": 1.0}),
        predict(result(workers=8, process_ms=2.0, stages={"__getitem__": 1.0}), load_demand("nvidia-h200", demands)),
    )
    assert check_thresholds(fed, "t", thresholds)[0].outcome is Outcome.PASS
    (missing,) = check_thresholds(result(), "t", thresholds)  # no prediction made: unavailable, never a pass
    assert missing.outcome is Outcome.UNAVAILABLE


def test_on_the_runner_itself_the_measured_figure_is_judged():
    (threshold,) = parse_thresholds({"min_input_efficiency": 0.9, "predict_for": "nvidia-h200"})
    on_gpu = result(device="cuda")
    on_gpu.metrics["input_efficiency"] = Metric("input_efficiency", 0.95, "fraction")
    assert check_thresholds(on_gpu, "t", [threshold])[0].outcome is Outcome.PASS


def test_predict_for_must_name_a_runner():
    with pytest.raises(Exception, match="name a GPU runner"):
        parse_thresholds({"predict_for": 3})


def test_prediction_metric_keeps_an_unavailable_reason():
    m = prediction_metric(Metric.unavailable("predicted_input_efficiency", "why", "fraction"))
    assert not m.available and m.reason == "why"


def test_the_committed_provisional_demand_reads():
    root = Path(__file__).resolve().parents[2] / "baselines" / "demand"
    d = load_demand("nvidia-h200", root)
    rates = {e.step["aug"]: e.median for e in d.entries if e.workload == "face_parsing" and e.scale == "full"}
    assert set(rates) == {"cpu", "gpu"} and rates["cpu"] < rates["gpu"]
    assert all(e.provenance for e in d.entries)


def test_compare_shows_a_pull_request_s_predicted_change(demands: Path):
    from perfsuite.core import metrics as registry
    from perfsuite.judge.engine import judge_metric

    d = load_demand("nvidia-h200", demands)
    base = with_prediction(result(workers=8, process_ms=20.0), predict(result(workers=8, process_ms=20.0), d))
    head = with_prediction(result(process_ms=40.0), predict(result(process_ms=40.0), d))
    v = judge_metric(registry.get("predicted_input_efficiency"), base, head, "t")
    assert v.message.startswith("the loader feeds 800 -> 100 samples/s on the nvidia-h200 runner, which consumes 420")
    assert "input efficiency 1.00 -> 0.24, predicted" in v.message


def test_doctor_notes_each_diagnosis_s_prediction(demands: Path):
    import types

    from perfsuite.cli.doctor import _predicted

    fed = result(workers=8, process_ms=2.0, stages={"__getitem__": 1.0})
    diagnoses = [types.SimpleNamespace(results=(result(),), notes=[]), types.SimpleNamespace(results=(fed,), notes=[])]
    _predicted(diagnoses, load_demand("nvidia-h200", demands))
    assert diagnoses[0].notes[0].startswith("predicted for nvidia-h200: input efficiency 0.48")
    assert "(starved)" in diagnoses[0].notes[0] and "(fed)" in diagnoses[1].notes[0]
    other = types.SimpleNamespace(results=(result(scale="smoke"),), notes=[])
    _predicted([other], load_demand("nvidia-h200", demands))
    assert other.notes[0].startswith("predicted for nvidia-h200: unavailable: no demand for face_parsing")
