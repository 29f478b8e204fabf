"""Input efficiency: the window's samples/s over the step's speed of light (one batch kept on the device)."""

from __future__ import annotations

import pytest

from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, input_band, input_efficiency, run
from perfsuite.judge.thresholds import check_thresholds, parse_threshold
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.syncs import SyncProbe


@pytest.mark.parametrize(
    "wait,band",
    [
        (0.0, "not input-bound"),
        (0.0499, "not input-bound"),
        (0.05, "moderately input-bound"),
        (0.1999, "moderately input-bound"),
        (0.2, "highly input-bound"),
        (0.9, "highly input-bound"),
    ],
)
def test_tensorflow_bands(wait, band):
    assert input_band(wait) == band


def test_efficiency_is_window_rate_over_speed_of_light_rate():
    # 10 steps of batch 8 in 2 s = 40 samples/s; speed of light 8 samples per 100 ms = 80 samples/s.
    t = WindowTimings(start_s=0.0, end_s=2.0, steps=10, batch_size=8, fetch_s=[0.03] * 10, samples=80)
    m = input_efficiency(t, [120.0, 100.0, 90.0], 8, 3)
    assert m.value == pytest.approx(0.5)
    assert m.detail["sol_step_ms"] == 100.0 and m.detail["sol_samples_per_s"] == pytest.approx(80.0)
    assert m.detail["data_wait"] == pytest.approx(0.15) and m.detail["band"] == "moderately input-bound"


def test_without_speed_of_light_steps_it_is_unavailable_with_the_reason():
    t = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=8, samples=16)
    m = input_efficiency(t, [], 8, 0)
    assert not m.available and "sol_steps=0" in m.reason


def test_bound_by_min_input_efficiency():
    from perfsuite.core.results import Fingerprint, Metric, Result

    threshold = parse_threshold("min_input_efficiency", 0.9)
    result = Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={"input_efficiency": Metric("input_efficiency", 0.5)},
        samples={},
        fingerprint=Fingerprint.collect("cpu"),
        batch_size=8,
        steps=2,
        warmup=0,
    )
    (v,) = check_thresholds(result, "t", [threshold])
    assert v.outcome is Outcome.FAIL and v.message == "input_efficiency 0.5 < 0.9"


def _run(sol_steps):
    knobs = Knobs.from_flat(aug="none", num_workers=0, log_interval=2, device="cpu", pin_memory=True, non_blocking=True)
    return run(
        RunSpec("gray_classifier", knobs=knobs, steps=4, warmup=1, observe_steps=4, sol_steps=sol_steps),
        probes=[SyncProbe()],
    )


@pytest.mark.slow
def test_a_run_measures_it_after_the_window_and_leaves_the_observed_steps_alone():
    with_sol, without = _run(3), _run(0)
    m = with_sol.metric("input_efficiency")
    assert m.detail["sol_steps"] == 3
    # Measured: a value in (0, 1] within the share of the window not spent waiting, or, when the speed of light
    # was slowed (the window beat it, or its step took longer than the window's own), unavailable saying so.
    wait = m.detail["data_wait"]
    assert (m.available and 0 < m.value <= (1 - wait) * 1.05) or m.reason.startswith(
        ("the window ran", "the speed-of-light step")
    )
    assert m.detail["band"] in ("not input-bound", "moderately input-bound", "highly input-bound")
    assert len(with_sol.samples["sol_step_ms"]) == 3 and without.samples["sol_step_ms"] == []
    assert not without.metric("input_efficiency").available
    # the speed-of-light steps reuse the observed steps' indices: the exact counts are those of a run without them
    assert with_sol.value("syncs_per_step") == without.value("syncs_per_step") == 0.5


@pytest.mark.slow
def test_a_users_job_gets_it_through_its_own_step(tmp_path):
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "own_pipeline"
    sys.path.insert(0, str(example))
    try:
        import make_data
        import perf_jobs

        faces = make_data.write_dataset(tmp_path / "faces", count=8, size=32)
        job = perf_jobs.face_job(faces, "cpu", "cpu", workers=0)
        result = run(RunSpec(job, steps=3, warmup=1, observe_steps=2, sol_steps=2, period_steps=0))
    finally:
        sys.path.remove(str(example))
    m = result.metric("input_efficiency")
    assert len(result.samples["sol_step_ms"]) == 2 and m.detail["sol_steps"] == 2  # measured through the job's step
    # a value, or unavailable saying its speed of light was slowed (the window beat it, or outran its step work)
    assert (m.available and m.value > 0) or m.reason.startswith(("the window ran", "the speed-of-light step"))
    assert result.value("syncs_per_step") == 1  # the user's loss.item(), counted in the observed steps only


def test_a_window_faster_than_its_speed_of_light_gives_no_efficiency_above_1():
    # 10 steps of batch 8 in 0.5 s = 160 samples/s; the speed-of-light steps took 100 ms each = 80 samples/s.
    t = WindowTimings(start_s=0.0, end_s=0.5, steps=10, batch_size=8, fetch_s=[0.001] * 10, samples=80)
    m = input_efficiency(t, [100.0, 100.0, 100.0], 8, 3)
    assert not m.available
    assert m.reason.startswith("the window ran 2.00x its speed of light (50 ms per step, fetch included, vs 100 ms")
    assert "not input-bound" in m.reason and m.detail["sol_samples_per_s"] == pytest.approx(80.0)


def test_an_efficiency_above_the_share_not_spent_waiting_is_unavailable_with_both_times():
    """0.83 beside a 22.6% data wait (the README's first capture) cannot both be true: the speed of light ran
    slower than the window's own step work."""
    # 10 steps of batch 8 in 1 s, 0.3 s of it waiting: 70 ms of step work per step. A 60 ms speed of light gives
    # 0.6 (consistent); an 80 ms one gives 0.8, above the 70% of the window not spent waiting.
    t = WindowTimings(start_s=0.0, end_s=1.0, steps=10, batch_size=8, fetch_s=[0.03] * 10, samples=80)
    assert input_efficiency(t, [60.0] * 5, 8, 5).value == pytest.approx(0.6)
    m = input_efficiency(t, [80.0] * 5, 8, 5)
    assert not m.available and m.detail["data_wait"] == pytest.approx(0.3)
    assert m.reason.startswith("the speed-of-light step (80 ms fed a cached batch) took longer than the window's own")
    assert "(70 ms)" in m.reason and "(0.80) would exceed the 70%" in m.reason and "highly input-bound" in m.reason


def test_periodic_work_in_the_window_is_left_out_of_input_efficiency():
    """The UNet case: an evaluation every 5 steps (2.4 s) in the window; the window's mean step against the speed
    of light's median read 0.71-0.86 beside a 0.3% data wait."""
    host = [0.1 + (2.4 if (i + 1) % 5 == 0 else 0.0) for i in range(20)]
    fetch = [0.0003] * 20
    t = WindowTimings(
        start_s=0.0, end_s=sum(host), steps=20, batch_size=8, fetch_s=fetch, host_step_s=host, samples=160
    )
    m = input_efficiency(t, [99.0] * 5, 8, 5)
    assert m.detail["periodic_left_out"]["every"] == 5 and m.detail["periodic_left_out"]["steps"] == 4
    assert m.value == pytest.approx(0.99, abs=0.01)  # the steady steps against the cached-batch step
    steady = WindowTimings(start_s=0.0, end_s=2.0, steps=20, batch_size=8, fetch_s=fetch, host_step_s=[0.1] * 20)
    assert input_efficiency(steady, [99.0] * 5, 8, 5).detail["periodic_left_out"] is None
