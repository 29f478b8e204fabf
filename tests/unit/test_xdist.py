"""Worker k's GPU under pytest-xdist, and what a worker sends to the controller (no xdist needed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError
from perfsuite.judge.verdict import Outcome, Verdict
from perfsuite.plugin.session import PerfSession
from perfsuite.plugin.settings import Settings
from perfsuite.plugin.xdist import assign_worker_gpu, has_content, merge_worker_part, worker_gpu, worker_payload

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def no_gpu() -> int:
    return 0


def four_gpus() -> int:
    return 4


@pytest.mark.parametrize(
    ("worker", "workers", "spec", "env", "count", "expected"),
    [
        pytest.param("gw1", 2, "auto", {}, four_gpus, "1", id="auto-nvml"),
        pytest.param("gw1", 2, "auto", {"CUDA_VISIBLE_DEVICES": "4,6"}, four_gpus, "6", id="auto-visible"),
        pytest.param("gw0", 2, "auto", {}, no_gpu, None, id="auto-cpu"),
        pytest.param("gw3", 4, "0, 1,2,3", {}, no_gpu, "3", id="list"),
        pytest.param("gw1", 2, "off", {"CUDA_VISIBLE_DEVICES": "0"}, four_gpus, None, id="off"),
    ],
)
def test_worker_k_gets_device_k(worker, workers, spec, env, count, expected) -> None:
    assert worker_gpu(worker, workers, spec, env, count) == expected


@pytest.mark.parametrize(
    ("spec", "env", "match"),
    [
        ("auto", {"CUDA_VISIBLE_DEVICES": "0"}, "gives 1 GPU"),
        ("0,,1", {}, "an empty entry"),
    ],
)
def test_too_few_gpus_or_a_bad_list_is_refused(spec, env, match) -> None:
    with pytest.raises(PerfsuiteError, match=match):
        worker_gpu("gw0", 2, spec, env, four_gpus)


def test_only_workers_are_assigned_a_gpu() -> None:
    env: dict[str, str] = {}
    assert assign_worker_gpu(SimpleNamespace(), "0,1", env) is None and env == {}
    worker = SimpleNamespace(workerinput={"workerid": "gw1", "workercount": 2})
    assert assign_worker_gpu(worker, "0,1", env) == "1" and env == {"CUDA_VISIBLE_DEVICES": "1"}


def test_a_worker_part_survives_the_channel_and_merges_into_the_controller(tmp_path: Path) -> None:
    worker = PerfSession(Settings(baselines=tmp_path))
    worker.results["t.py::a"] = Result.from_json((DATA / "base.json").read_text())
    worker.verdicts.append(Verdict("t.py::a", "step_ms", 1.0, 2.0, 2.0, Outcome.REGRESSED, "slower", "cause"))
    worker.problems.append("baseline error: x")
    worker.saved.append(tmp_path / "b.json")
    part = json.loads(json.dumps(worker_payload(worker)))  # what execnet carries: plain JSON-able data
    controller = PerfSession(Settings(baselines=tmp_path))
    assert has_content(part) and not has_content(worker_payload(None))
    merge_worker_part(controller, part)
    assert controller.results == worker.results and controller.verdicts == worker.verdicts
    assert controller.problems == worker.problems and controller.saved == worker.saved
