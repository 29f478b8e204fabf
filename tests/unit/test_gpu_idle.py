"""The GPU's idle time between steps from its own clock (perfsuite.harness.idle), checked on a CPU.

A CUDA event completes when its stream reaches it: at the later of the host's record call and the end of the work
queued before it. ``SimulatedStream`` models exactly that, and stands in for ``torch.cuda.Event`` inside the real
StepClock, so the driver's pairing of marks (the request for a batch, then the batch in hand) is tested against a
known GPU timeline: a host that waits for its batch while the GPU still works overlaps, and only the GPU's own
idle time counts. On a CPU run the figure is unavailable, and the window runs what it ran without the marks.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from perfsuite.core.results import Metric
from perfsuite.harness import clock as clock_mod
from perfsuite.harness.clock import StepClock, paired_ms
from perfsuite.harness.idle import against_nvml, gpu_idle
from perfsuite.harness.runner import input_efficiency
from perfsuite.probes.base import WindowTimings


class SimulatedStream:
    """One GPU stream on a simulated clock (ms): the host's time, and when the queued work ends."""

    def __init__(self) -> None:
        self.host = 0.0
        self.free_at = 0.0
        self.idle = 0.0  # the ground truth: time the stream had nothing queued, between its first and last work

    def host_work(self, ms: float) -> None:
        self.host += ms

    def enqueue(self, ms: float) -> None:
        start = max(self.host, self.free_at)
        self.idle += max(0.0, self.host - self.free_at)
        self.free_at = start + ms

    def event(self) -> Any:
        stream = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t: float | None = None

            def record(self) -> None:
                self.t = max(stream.host, stream.free_at)

            def elapsed_time(self, other: Any) -> float:
                return other.t - self.t

        return Event


def simulate(fetch_ms: list[float], gpu_ms: list[float], launch_ms: float = 0.0) -> tuple[WindowTimings, float]:
    """A window of steps as the driver marks them: request mark, fetch, ready mark, then the step's kernels
    (``launch_ms`` of host work after the batch is in hand, before the first kernel: idle, but not for want of a
    batch, so not measured)."""
    stream = SimulatedStream()
    cuda = types.SimpleNamespace(type="cuda")
    event = stream.event()
    torch_cuda_event = torch.cuda.Event
    torch.cuda.Event = event  # type: ignore[misc]  # StepClock reads it at construction
    try:
        steps, ready = StepClock(cuda), StepClock(cuda)
    finally:
        torch.cuda.Event = torch_cuda_event  # type: ignore[misc]
    for fetch, gpu in zip(fetch_ms, gpu_ms):
        steps.mark()  # the request for the batch
        stream.host_work(fetch)  # the host waits in next(loader)
        ready.mark()  # the batch is in hand
        stream.host_work(launch_ms)
        stream.enqueue(gpu)  # the step's kernels
    steps.mark()  # the window's last request
    t = WindowTimings(
        start_s=0.0,
        end_s=stream.free_at / 1e3,
        steps=len(fetch_ms),
        batch_size=8,
        fetch_s=[f / 1e3 for f in fetch_ms],
        step_ms=steps.durations_ms(),
        samples=8 * len(fetch_ms),
        idle_ms=paired_ms(steps, ready),
        device_clock="cuda-events",
    )
    return t, stream.idle


def test_a_gpu_busy_through_the_host_s_wait_is_not_idle():
    # The host waits 40 ms per batch, the GPU works 100 ms per step: after the first batch the wait overlaps.
    t, truth = simulate([40.0] * 8, [100.0] * 8)
    m = gpu_idle(t)
    assert sum(t.idle_ms) == pytest.approx(truth) == pytest.approx(40.0)  # only the first batch left it idle
    assert m.value == pytest.approx(40.0 / sum(t.step_ms))
    data_wait = sum(t.fetch_s) / t.wall_s
    assert data_wait > 0.3 > m.value  # the host's wait is not the GPU's idle time


def test_a_starved_gpu_is_idle_for_what_the_loader_adds():
    # The host waits 150 ms per batch for a 50 ms step: a step every 150 ms, the GPU busy 50 of them (its kernels
    # overlap the next fetch), so idle 100 of every 150 ms, and the whole first fetch.
    t, truth = simulate([150.0] * 6, [50.0] * 6)
    assert sum(t.idle_ms) == pytest.approx(truth) == pytest.approx(150.0 + 5 * 100.0)
    m = gpu_idle(t)
    assert m.value == pytest.approx(650.0 / 950.0)
    low, high = m.detail["interval"]
    assert 0.0 <= low <= m.value <= high <= 1.0


def test_uneven_steps_are_measured_step_by_step():
    t, truth = simulate([10.0, 300.0, 10.0, 10.0, 200.0, 10.0], [100.0] * 6)
    assert sum(t.idle_ms) == pytest.approx(truth)
    assert [round(x) for x in t.idle_ms] == [10, 200, 0, 0, 0, 0]  # the 200 ms wait fell within GPU work


def test_the_host_s_launch_after_the_batch_is_not_counted_as_waiting_for_it():
    t, truth = simulate([150.0] * 4, [50.0] * 4, launch_ms=5.0)
    assert sum(t.idle_ms) == pytest.approx(truth - 4 * 5.0)


def test_input_efficiency_is_bounded_by_the_gpu_s_busy_share_not_the_host_s():
    # As on the H200: the host waited 44% of the window while the GPU was busy about 75% of it. The speed of light
    # (the step's GPU time on a cached batch) gives an efficiency the host's wait would contradict, the GPU's not.
    t, _ = simulate([120.0] * 12, [300.0] * 12)
    sol_ms = [300.0] * 5
    m = input_efficiency(t, sol_ms, 8, 5)
    assert m.available, m.reason
    assert m.value <= 1.0 - m.detail["device_idle"] + 1e-9 or m.value <= (1.0 - m.detail["device_idle"]) * 1.05
    assert m.detail["band_from"].startswith("the GPU's idle time")
    assert m.detail["data_wait"] > m.detail["device_idle"]


def test_on_a_cpu_the_figure_is_unavailable_and_says_which_one_to_read():
    t = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=8, step_ms=[1.0, 1.0], idle_ms=[0.5, 0.5])
    m = gpu_idle(t)
    assert not m.available and "data_wait_frac" in m.reason


def test_nvml_beside_it_agrees_or_the_result_says_why_not():
    t, _ = simulate([150.0] * 6, [50.0] * 6)
    idle = gpu_idle(t)
    busy = 1 - idle.value
    agreed, note = against_nvml(idle, Metric("gpu_util", busy + 0.05, "fraction"), [busy] * 10)
    assert note is None and agreed.detail["nvml_agrees"] is True and agreed.value == idle.value
    apart, note = against_nvml(idle, Metric("gpu_util", 0.97, "fraction"), [0.97, 0.96, 0.98])
    assert apart.detail["nvml_agrees"] is False and note is not None and "NVML read 97%" in note
    unchanged, note = against_nvml(idle, Metric.unavailable("gpu_util", "no NVML"), [])
    assert unchanged is idle and note is None


def test_the_window_runs_the_same_steps_with_the_ready_marks(monkeypatch):
    """The ready marks are the only addition: one host clock read per step on a CPU (an event record on a GPU), no
    synchronisation in the window, the same steps and batches."""
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.runner import RunSpec, run

    syncs: list[str] = []
    real = clock_mod.synchronize
    monkeypatch.setattr("perfsuite.harness.driver.synchronize", lambda d: (syncs.append("sync"), real(d)))
    marks: list[int] = []
    original_mark = StepClock.mark
    monkeypatch.setattr(StepClock, "mark", lambda self: (marks.append(id(self)), original_mark(self)))
    knobs = Knobs.from_flat(aug="none", num_workers=0, device="cpu", pin_memory=True, non_blocking=True)
    r = run(
        RunSpec("gray_classifier", knobs=knobs, steps=4, warmup=1, observe_steps=0, sol_steps=0, period_steps=0), []
    )
    window_marks = [m for m in marks]
    clocks = sorted(set(window_marks), key=window_marks.index)
    assert [window_marks.count(c) for c in clocks] == [5, 4]  # 4 steps: 5 request marks, 4 batches in hand
    assert len(r.samples["step_ms"]) == 4 and r.metric("samples_per_s").detail["samples"] == 4 * r.batch_size
    assert syncs == ["sync", "sync", "sync"]  # the window's two edges and the run's end: none per step
    assert not r.metric("gpu_idle_frac").available


@pytest.mark.parametrize(
    "util,sm,said",
    [(0.966, 0.534, True), (0.748, 0.636, False), (0.95, 0.7, False), (0.5, 0.2, False), (None, 0.3, False)],
)
def test_a_busy_gpu_with_idle_sms_is_told_what_would_use_them(util, sm, said):
    from perfsuite.harness.idle import underused_sms

    u = Metric("gpu_util", util, "fraction") if util is not None else Metric.unavailable("gpu_util", "no NVML")
    note = underused_sms(u, Metric("gpu_sm_util", sm, "fraction"))
    assert (note is not None) is said
    if said:
        assert "larger batch" in note and "torch.compile" in note and "channels_last" in note
