"""A headline that agrees with its evidence: no finding names a band its interval does not decide, every fraction's
interval stays in [0, 1], and the headline is the measured gain, else the decided bottleneck, else "not decided"
with what would decide it. Table-driven over hand-made and recorded (H200) Results, without runs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from doctor_evidence import recorded_contention, result

from perfsuite.core.results import Metric, Result
from perfsuite.harness.runner import INPUT_BANDS
from perfsuite.tools import doctor
from perfsuite.tools.doctor.model import Counterfactuals, Efficiency

H200 = Path(__file__).parents[1] / "data" / "results" / "h200"
BANDS = [name for _, name in INPUT_BANDS]


def h200(name: str) -> Result:
    return Result.from_json((H200 / f"{name}.json").read_text(encoding="utf-8"))


def with_gpu_idle(r: Result, frac: float, low: float, high: float) -> Result:
    """``r`` with the GPU's idle time as perfsuite.harness.idle records it (value, its interval, its steps)."""
    metrics = {
        **r.metrics,
        "gpu_idle_frac": Metric("gpu_idle_frac", frac, "fraction", detail={"interval": [low, high], "steps": 12}),
    }
    return dataclasses.replace(r, metrics=metrics)


CASES: dict[str, Any] = {
    "decided highly": lambda: [result(fetch=[100.0, 110.0] * 9, host=[200.0] * 18, epoch_fetch=[])],
    "spans the 20% edge": lambda: [result(fetch=[5.0, 35.0] * 9, host=[100.0] * 18, epoch_fetch=[])],
    "spans the 5% edge": lambda: [result(fetch=[0.0, 0.0, 15.0] * 6, host=[100.0] * 18, epoch_fetch=[])],
    "decided not": lambda: [result(fetch=[0.1, 0.2, 0.0] * 6, host=[100.0] * 18, epoch_fetch=[])],
    "spans 5% on a busy machine": lambda: [
        result(
            fetch=[0.0, 0.0, 15.0] * 6,
            host=[100.0] * 18,
            epoch_fetch=[],
            environment=recorded_contention(0.9, 3, neighbours=0.6),
        )
    ],
    "waits longer than its step (a bound above 100%)": lambda: [
        result(fetch=[400.0] * 3 + [0.0] * 3, host=[300.0] * 6, epoch_fetch=[])
    ],
    "H200 seed": lambda: [h200("seed-a")],
    "H200 tuned": lambda: [h200("tuned")],
    "H200 seed, GPU idle decided": lambda: [with_gpu_idle(h200("seed-a"), 0.30, 0.24, 0.37)],
    "H200 seed, GPU idle across the 20% edge": lambda: [with_gpu_idle(h200("seed-a"), 0.22, 0.15, 0.30)],
    "H200 seed, GPU idle across the 5% edge": lambda: [with_gpu_idle(h200("seed-a"), 0.06, 0.01, 0.12)],
}


def claimed_bands(text: str) -> set[str]:
    """The bands a text names as a claim (``not decided`` words name none)."""
    return {b for b in BANDS if re.search(rf"(?<![\w-]){re.escape(b)}", text)}


@pytest.mark.parametrize("case", list(CASES))
def test_no_title_names_a_band_its_interval_does_not_decide(case: str) -> None:
    d = doctor.assess(case, CASES[case](), [], Counterfactuals(), 2)
    w = d.evidence.wait
    for text in [d.bottleneck, *(f.title for f in d.findings)]:
        for band in claimed_bands(text):
            assert w.band == band, f"{case}: {text!r} names {band} over {w.interval}"
    assert 0.0 <= w.low <= w.share <= w.high <= 1.0 or 0.0 <= w.low <= w.high <= 1.0, (case, w)
    eff = d.evidence.efficiency
    if isinstance(eff, Efficiency):
        assert 0.0 <= eff.low <= eff.high <= 1.0, (case, eff)


def test_an_interval_left_outside_0_1_is_clipped_and_says_so() -> None:
    d = doctor.assess("x", CASES["waits longer than its step (a bound above 100%)"](), [], Counterfactuals(), 2)
    w = d.evidence.wait
    assert w.high == 1.0 and w.clipped and "clipped to [0, 1]" in w.interval


@pytest.mark.parametrize(
    "case,head",
    [
        ("decided highly", "highly input-bound: "),
        ("decided not", "not input-bound: the step itself is the bottleneck"),
        ("spans the 5% edge", "not decided: data wait"),
    ],
)
def test_the_headline_is_the_decided_bottleneck_else_not_decided(case: str, head: str) -> None:
    d = doctor.assess(case, CASES[case](), [], Counterfactuals(), 2)
    assert d.bottleneck.startswith(head), d.bottleneck
    if head.startswith("not decided"):
        assert "spans the 5% edge" in d.bottleneck and "a longer --budget" in d.bottleneck
        assert "a GPU" in d.bottleneck and "a quieter machine" not in d.bottleneck


def test_not_decided_on_a_busy_machine_names_a_quieter_one() -> None:
    d = doctor.assess("x", CASES["spans 5% on a busy machine"](), [], Counterfactuals(), 2)
    assert d.evidence.wait.input_bound is None and "a quieter machine" in d.bottleneck


def test_on_cuda_the_band_reads_the_gpus_idle_time_not_the_hosts_wait() -> None:
    """Observed on the H200: the headline from the host's wait (44%) beside NVML's 75% utilisation."""
    d = doctor.assess("x", CASES["H200 seed, GPU idle across the 5% edge"](), [], Counterfactuals(), 2)
    w = d.evidence.wait
    assert w.source == "GPU idle" and (w.share, w.low, w.high) == (0.06, 0.01, 0.12) and w.band is None
    assert d.bottleneck.startswith("not decided: GPU idle 6.0% [95% CI 1.0%..12.0%] spans the 5% edge")
    decided = doctor.assess("x", CASES["H200 seed, GPU idle decided"](), [], Counterfactuals(), 2)
    assert decided.evidence.wait.band == "highly input-bound" and decided.bottleneck.startswith("highly input-bound")
    host = doctor.assess("x", [h200("seed-a")], [], Counterfactuals(), 2)  # recorded before gpu_idle_frac existed
    assert host.evidence.wait.source == "data wait"
    assert any("gpu_idle_frac unavailable (no probe measured gpu_idle_frac" in n for n in host.notes)
