"""NVML telemetry: sampler logic against a fake backend; device mapping; unavailable off CUDA."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch

from perfsuite.probes.base import WindowTimings
from perfsuite.probes.gpm import GPM_NAMES
from perfsuite.probes.nvml import NvmlProbe, NvmlSampler, nvml_target

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)
VALUES = {
    "gpu_util": 0.5,
    "power_w": 300.0,
    "mem_mb": 2048.0,
    "sm_clock_mhz": 1800,
    "mem_clock_mhz": 2619,
    "mem_total_mb": 81559.0,
    "temp_c": 70,
    "throttle": 0x4 | 0x1,
}


class FakeNvml:
    """A device that answers every field, except those in ``missing``; ``fail_ticks`` fail entirely."""

    def __init__(
        self,
        missing: tuple[str, ...] = (),
        fail_ticks: tuple[int, ...] = (),
        buffered: list[tuple[int, float]] | None = None,
    ) -> None:
        self.missing, self.fail_ticks, self.buffered = missing, fail_ticks, buffered
        self.reads: dict[str, int] = {}
        self.closed = 0

    def read(self, name: str) -> float:
        count = self.reads[name] = self.reads.get(name, 0) + 1
        if name in self.missing:
            raise RuntimeError(f"NVML_ERROR_NOT_SUPPORTED: {name}")
        if count - 1 in self.fail_ticks:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return VALUES[name]

    def util_samples(self, since_us: int) -> list[tuple[int, float]]:
        if self.buffered is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED: samples")
        out, self.buffered = [s for s in self.buffered if s[0] > since_us], []
        return out

    def power_limit_w(self) -> float:
        return 600.0

    def close(self) -> None:
        self.closed += 1


def _cuda_probe(fake: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> NvmlProbe:
    monkeypatch.setattr("perfsuite.probes.nvml._target_for", lambda device: ("index", 1))
    probe = NvmlProbe(backend_factory=lambda target: fake, interval_s=0.001)
    probe.setup(SimpleNamespace(device="cuda:0", observe_steps=0))
    return probe


def _window(probe: NvmlProbe) -> dict:
    probe.start()
    probe.stop()
    probe.stop()  # safe twice
    return {m.name: m for m in probe.metrics(TIMINGS)}


def test_summary_metrics_from_a_healthy_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    probe = _cuda_probe(fake, monkeypatch)
    m = _window(probe)
    assert m["gpu_util"].value == 0.5 and m["gpu_util"].detail["source"].startswith("polled")
    assert m["gpu_power_w"].value == 300.0
    assert m["gpu_power_w"].detail["limit_w"] == 600.0 and m["gpu_power_w"].detail["frac_of_limit"] == 0.5
    assert m["gpu_mem_mb"].value == 2048.0
    assert m["sm_clock_mhz"].value == 1800
    assert m["sm_clock_mhz"].detail["throttle_reasons"] == {"gpu_idle": 1.0, "sw_power_cap": 1.0}
    assert m["sm_clock_mhz"].detail["temp_c"] == {"mean": 70, "max": 70}
    assert fake.closed == 1
    timeline = probe.timeline()
    assert set(timeline) == {"t_s", "gpu_util", "power_w", "mem_mb", "sm_clock_mhz", "mem_clock_mhz", "temp_c"}
    assert len(timeline["t_s"]) >= 2 and timeline["power_w"] == [300.0] * len(timeline["t_s"])


def test_buffered_driver_samples_inside_the_window_win_over_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(buffered=[])
    probe = _cuda_probe(fake, monkeypatch)
    probe.start()
    start_us = int(probe.sampler.start_s * 1e6)
    fake.buffered = [(start_us - 5, 0.0), (start_us + 1, 0.25), (start_us + 2, 0.75)]  # the first is before the window
    probe.sampler.tick()
    probe.stop()
    util = {m.name: m for m in probe.metrics(TIMINGS)}["gpu_util"]
    assert util.value == 0.5 and util.detail["source"] == "nvmlDeviceGetSamples (driver-buffered)"
    assert util.detail["samples"] == 2 and util.detail["meaning"].startswith("kernel-active time")


def test_a_field_the_gpu_lacks_is_unavailable_with_the_nvml_error(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = _cuda_probe(FakeNvml(missing=("power_w", "throttle")), monkeypatch)
    m = _window(probe)
    assert m["gpu_power_w"].value is None and "NVML_ERROR_NOT_SUPPORTED: power_w" in m["gpu_power_w"].reason
    assert m["gpu_util"].value == 0.5 and m["sm_clock_mhz"].detail["throttle_reasons"] == {}
    assert "power_w" not in probe.timeline()


def test_failures_mid_run_drop_those_samples_and_the_sampler_keeps_going(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(fail_ticks=(1, 2))
    probe = _cuda_probe(fake, monkeypatch)
    probe.start()
    for _ in range(4):
        probe.sampler.tick()
    probe.stop()
    ticks = len(probe.sampler.timeline.t_s)
    assert probe.sampler.timeline.values["power_w"].count(None) == 2
    assert len(probe.timeline()["t_s"]) == ticks - 2
    assert {m.name: m for m in probe.metrics(TIMINGS)}["gpu_power_w"].value == 300.0


def test_the_sampler_thread_stops_when_the_run_raises() -> None:
    sampler = NvmlSampler(FakeNvml(fail_ticks=tuple(range(10**6))), interval_s=0.001)
    with pytest.raises(ZeroDivisionError):
        try:
            sampler.start()
            1 / 0  # noqa: B018 - the workload fails mid-window
        finally:
            sampler.stop()
    assert not any(t.name == "perfsuite-nvml" for t in threading.enumerate())


def test_off_cuda_every_gpu_metric_is_unavailable_with_a_reason() -> None:
    probe = NvmlProbe(backend_factory=lambda target: pytest.fail("no backend off CUDA"))
    probe.setup(SimpleNamespace(device="cpu", observe_steps=0))
    m = _window(probe)
    assert set(m) == {"gpu_util", "gpu_power_w", "gpu_mem_mb", "sm_clock_mhz", *GPM_NAMES}
    assert all(x.value is None and "device=cpu" in x.reason for x in m.values())
    assert probe.timeline() == {}


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ImportError("No module named 'pynvml'"), "nvidia-ml-py"),
        (RuntimeError("NVML Shared Library Not Found"), "no NVML: RuntimeError: NVML Shared Library Not Found"),
    ],
    ids=["no-pynvml", "no-driver"],
)
def test_without_nvml_metrics_are_unavailable_not_an_exception(
    error: Exception, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def factory(target):  # type: ignore[no-untyped-def]
        raise error

    monkeypatch.setattr("perfsuite.probes.nvml._target_for", lambda device: ("index", 0))
    probe = NvmlProbe(backend_factory=factory)
    probe.setup(SimpleNamespace(device="cuda", observe_steps=0))
    assert all(m.value is None and reason in m.reason for m in _window(probe).values())


def test_the_real_backend_without_a_driver_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("perfsuite.probes.nvml._target_for", lambda device: ("index", 0))
    probe = NvmlProbe()
    probe.setup(SimpleNamespace(device="cuda", observe_steps=0))
    metrics = _window(probe)
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: see test_real_gpu_telemetry")
    assert all(m.value is None and m.reason.startswith("no NVML") for m in metrics.values())


@pytest.mark.parametrize(
    ("index", "visible", "uuid", "expected"),
    [
        (0, None, None, ("index", 0)),
        (1, None, None, ("index", 1)),
        (0, "2,3", None, ("index", 2)),
        (1, "2,3", None, ("index", 3)),
        (0, "GPU-8f3c,1", None, ("uuid", "GPU-8f3c")),
        (1, "0", "5e0f2c1a-0000-1111-2222-333344445555", ("uuid", "GPU-5e0f2c1a-0000-1111-2222-333344445555")),
        (0, "MIG-abc", "MIG-abc", ("uuid", "MIG-abc")),
    ],
    ids=["default", "second", "visible-index", "visible-second", "visible-uuid", "torch-uuid-wins", "mig"],
)
def test_torch_device_maps_to_the_right_nvml_device(index, visible, uuid, expected) -> None:  # type: ignore
    assert nvml_target(index, visible, uuid) == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and an NVIDIA driver for real NVML readings")
def test_real_gpu_telemetry() -> None:
    probe = NvmlProbe()
    probe.setup(SimpleNamespace(device="cuda", observe_steps=0))
    probe.start()
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(50):
        a = a @ a / 4096
    torch.cuda.synchronize()
    probe.stop()
    m = {x.name: x for x in probe.metrics(TIMINGS)}
    assert all(x.available for x in m.values()), {n: x.reason for n, x in m.items()}
    assert 0.0 <= m["gpu_util"].value <= 1.0 and m["gpu_power_w"].value > 0 and m["sm_clock_mhz"].value > 0
