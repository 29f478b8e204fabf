"""All probes together on a real CPU run: every metric by its one name, measured or unavailable with a reason."""

from __future__ import annotations

import pytest
import torch

from perfsuite.core import metrics
from perfsuite.core.knobs import Knobs
from perfsuite.core.results import Result
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes import Probe, all_probes
from perfsuite.probes.gpm import GPM_NAMES

RUNNER = {s.name for s in metrics.all_specs() if s.probe == "runner"}
# Made only on several ranks: by the rank probe in each rank and the merge on rank 0 (tests/faults/test_ddp.py).
RANKS = {s.name for s in metrics.all_specs() if s.probe == "ranks"}
# Made only when a run is predicted for a GPU runner (--predict-for, predict_for=; tests/unit/test_starvation.py).
PREDICTED = {s.name for s in metrics.all_specs() if s.probe == "starvation"}
PROBED = set(metrics.names()) - RUNNER - RANKS - PREDICTED - {"label_violations"}


def test_all_probes_are_fresh_distinct_instances() -> None:
    first, second = all_probes(), all_probes()
    names = [p.name for p in first]
    assert len(set(names)) == len(names)
    expected = {"contention", "datawait", "loader", "loadercount", "nvml", "syncs", "compile", "amp", "cost", "memory"}
    assert expected | {"labels", "settings"} == set(names)
    assert all(a is not b for a, b in zip(first, second))


def test_every_registered_metric_is_made_by_a_known_probe() -> None:
    from perfsuite.judge.starvation import MAKER
    from perfsuite.probes.ranks import RankProbe

    probes = {p.name for p in all_probes()} | {"runner", RankProbe.name, MAKER}
    assert {s.probe for s in metrics.all_specs()} <= probes


class _WindowIsBare(Probe):
    """Placed after every other probe: records what instrumentation is active when the window opens."""

    name = "window-check"
    modes: tuple[int, int] | None = None

    def start(self) -> None:
        self.modes = (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())


@pytest.mark.slow
def test_a_cpu_run_reports_every_probe_metric_and_round_trips_through_json() -> None:
    knobs = Knobs.from_flat(aug="cpu", num_workers=1, log_interval=1, amp="bf16", pin_memory=True, non_blocking=True)
    check = _WindowIsBare()
    result = run(
        RunSpec("gray_classifier", knobs=knobs, steps=3, warmup=1, observe_steps=2), probes=[*all_probes(), check]
    )
    assert check.modes == (0, 0), "an instrumenting probe is still active in the measured window"
    assert set(result.metrics) >= PROBED
    assert set(result.metrics) >= RUNNER
    unavailable = {n for n in PROBED if not result.metric(n).available}
    assert unavailable == {
        "gpu_util",
        "gpu_power_w",
        "gpu_mem_mb",
        "sm_clock_mhz",
        "peak_mem_mb",
        "graph_breaks",
        "recompiles",
        "compile_s",
        *GPM_NAMES,  # GPU Performance Monitoring: NVML on a GPU, unavailable on a CPU run
    }
    assert all(result.metric(n).reason for n in unavailable)
    assert result.value("syncs_per_step") == 1.0
    assert result.value("amp_engaged") is True
    assert 0.0 <= result.value("data_wait_frac") <= 1.0
    assert result.metric("peak_rss_mb").detail["worker_processes"] >= 1
    assert Result.from_json(result.to_json()) == result
