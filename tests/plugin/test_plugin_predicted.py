"""A marker's input_efficiency bound for a named GPU runner, judged on a CPU run as a prediction (docs/gpu.md)."""

from __future__ import annotations

import json

from perfsuite_pytester import run

pytest_plugins = ["pytester"]

STEP = {"batch_size": 4, "aug": "none", "cutmix": 0.0, "mixup": 0.0, "amp": None, "compile": None}
STEP.update({"channels_last": False, "tf32": False, "cudnn_benchmark": False, "fused": False})


def demand(project, rate: float) -> None:
    entry = {"workload": "plugin_tiny", "scale": "smoke", "step": STEP, "sol_samples_per_s": [rate]}
    entry["host"] = {"calibrations_ms": [1.0], "usable_cores": 8}
    path = project.path / "baselines" / "demand" / "gpu-x.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "runner": "gpu-x", "entries": [entry]}))


TEST = """
import pytest

@pytest.mark.perf(min_input_efficiency=0.5, predict_for="gpu-x")
def test_fed_on_the_runner(perf_run):
    r = perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
    assert r.metric("predicted_input_efficiency").detail["runner"] == "gpu-x"
"""


def test_a_runner_that_consumes_more_than_the_loader_feeds_fails_naming_it(project):
    demand(project, 1e9)
    project.makepyfile(TEST)
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*input_efficiency * < 0.5, predicted for gpu-x from this run's loader*limited by*"])


def test_a_runner_the_loader_feeds_passes(project):
    demand(project, 1e-3)
    project.makepyfile(TEST)
    run(project).assert_outcomes(passed=1)


def test_a_runner_with_no_demand_fails_naming_the_command(project):
    project.makepyfile(TEST)
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no demand recorded for runner 'gpu-x'*perfsuite demand add*"])
