"""The loader alone (``--loader-only``) and the prediction for a GPU runner, through the runner and the CLI.

A loader-only window takes its batches and runs no step: the model is never called, the speed of light and the
observed steps are not run, and the loader's supply is measured with its real workers. ``--predict-for`` then
judges that supply against a runner's demand file, or refuses a runner that has none in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite.cli.main import main
from perfsuite.core.knobs import Knobs
from perfsuite.core.results import Result
from perfsuite.harness.runner import LOADER_ONLY_NOTE, RunSpec, run
from perfsuite.judge.starvation import Demand, Host, step_key, write_demand

ARGS = ["run", "gray_classifier", "--aug", "cpu", "--workers", "1", "--steps", "3", "--warmup", "1", "--device", "cpu"]


def counting(calls: list[int]):
    """A mutation that counts the pipeline's step calls into ``calls``."""

    def mutate(pipeline):
        step = pipeline.step
        pipeline.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]

    return mutate


def test_the_loader_alone_never_calls_the_step():
    calls: list[int] = []
    knobs = Knobs.from_flat(aug="cpu", num_workers=1, device="cpu")
    spec = RunSpec("gray_classifier", knobs=knobs, steps=3, warmup=1, mutate=counting(calls), loader_only=True)
    r = run(spec)
    assert calls == []
    assert LOADER_ONLY_NOTE in r.notes
    assert len(r.samples["step_ms"]) == 3 and r.metric("samples_per_s").detail["samples"] == 3 * r.batch_size
    assert not r.metric("input_efficiency").available  # no speed of light: nothing to compare the window with
    assert r.metric("loader_cpu_ms_per_sample").available  # the ledger's stages, for the limiting stage
    assert "syncs_per_step" not in r.metrics or not r.metric("syncs_per_step").available


def test_the_same_spec_with_its_step_calls_it():
    calls: list[int] = []
    knobs = Knobs.from_flat(aug="cpu", num_workers=0, device="cpu")
    run(
        RunSpec(
            "gray_classifier", knobs=knobs, steps=3, warmup=1, observe_steps=0, sol_steps=0, mutate=counting(calls)
        ),
        [],
    )
    assert len(calls) == 4  # the warm-up's and the window's: the counter sees what loader-only leaves out


@pytest.mark.slow
def test_predict_for_a_runner_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main([*ARGS, "--loader-only", "--json"]) == 0
    measured = Result.from_json(capsys.readouterr().out)
    ledger = measured.metric("loader_cpu_ms_per_sample")
    demand = Demand(
        runner="gpu-x",
        workload="gray_classifier",
        scale="smoke",
        step=step_key(measured),
        sol_samples_per_s=(1e9,),  # a step no loader can feed: starved
        host=Host((float(ledger.detail["calibration_ms"]),), 64),
        provenance="made in a test",
    )
    write_demand(tmp_path / "gpu-x.json", "gpu-x", [demand])
    argv = [*ARGS, "--loader-only", "--predict-for", "gpu-x", "--demand-dir", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)["metrics"]["predicted_input_efficiency"]
    assert 0.0 <= predicted["value"] < 0.01 and predicted["detail"]["verdict"] == "starved"
    assert predicted["detail"]["runner"] == "gpu-x" and predicted["detail"]["limiting"]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table folds to 80 columns when stdout is no terminal
    assert "predicted_input_efficiency" in out and "on gpu-x (starved)" in out


def test_predict_for_a_runner_with_no_demand_is_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert main([*ARGS, "--predict-for", "nvidia-b200", "--demand-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no demand recorded for runner 'nvidia-b200'" in err[0]


def test_demand_show_lists_the_committed_provisional_demand(capsys: pytest.CaptureFixture[str]):
    root = Path(__file__).resolve().parents[2] / "baselines" / "demand"
    assert main(["demand", "show", "nvidia-h200", "--demand-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "face_parsing (full; batch_size=32, aug=cpu)" in out and "provisional" in out


def test_demand_add_refuses_a_cpu_result_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from perfsuite.core.results import Fingerprint, Metric

    r = Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={"input_efficiency": Metric("input_efficiency", 0.5, "fraction", detail={"sol_samples_per_s": 9.0})},
        samples={},
        fingerprint=Fingerprint.collect("cpu"),
        batch_size=8,
        steps=2,
        warmup=0,
    )
    path = tmp_path / "r.json"
    path.write_text(r.to_json())
    assert main(["demand", "add", str(path), "--demand-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran on 'cpu'" in err[0]
