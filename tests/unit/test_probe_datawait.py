"""data_wait_frac: exact arithmetic, and a loader-bound configuration against a prefetching one."""

from __future__ import annotations

import pytest

from perfsuite.knobs import Knobs
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.datawait import DataWaitProbe
from perfsuite.runner import RunSpec, run


def test_the_fraction_is_time_blocked_in_next_over_window_wall_time() -> None:
    timings = WindowTimings(start_s=10.0, end_s=12.0, steps=4, batch_size=2, fetch_s=[0.25, 0.25, 0.5, 0.0])
    [epoch, metric] = DataWaitProbe().metrics(timings)
    assert metric.value == pytest.approx(0.5)
    assert epoch.value is None and "no epoch started" in epoch.reason
    assert metric.detail["wait_s"] == pytest.approx(1.0) and metric.detail["wall_s"] == pytest.approx(2.0)


def test_no_fetch_times_is_unavailable_with_a_reason() -> None:
    for metric in DataWaitProbe().metrics(WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)):
        assert metric.value is None and "fetch" in metric.reason


def test_epoch_start_fetches_are_their_own_samples() -> None:
    timings = WindowTimings(
        start_s=0.0, end_s=1.0, steps=3, batch_size=1, fetch_s=[0.1, 0.01, 0.2], epoch_fetch_ms=[100.0, 200.0]
    )
    epoch = DataWaitProbe().metrics(timings)[0]
    assert epoch.name == "epoch_fetch_ms" and epoch.value == 150.0 and epoch.detail["epochs_started"] == 2


@pytest.mark.slow
def test_cpu_augmentation_in_the_main_process_waits_more_than_a_prefetching_loader() -> None:
    """Seeds 000/003: per-sample CPU augmentation with no workers starves the step; workers that only
    decode, prefetching ahead while augmentation runs batched in the step, do not."""

    def wait(**knobs: object) -> float:
        spec = RunSpec("captcha_slider", knobs=Knobs.from_flat(**knobs), steps=4, warmup=1, observe_steps=0)
        return run(spec, probes=[DataWaitProbe()]).value("data_wait_frac")

    starved = wait(aug="cpu", num_workers=0)
    prefetching = wait(aug="gpu", num_workers=2, prefetch_factor=4, persistent_workers=True)
    assert starved > 3 * prefetching, (starved, prefetching)
