"""perfsuite monitor and GPM, against a fake NVML: the sampler, the summary, the GPM selection, what is missing."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from perfsuite.probes import gpm
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.gpm import GPM_NAMES, NvmlGpm
from perfsuite.probes.nvml import NvmlProbe
from perfsuite.tools.monitor import MonitorError, format_summary, monitor, open_backend, write_png

UTIL = [0.5, 0.7, 0.9, 0.7]
GPM_VALUES = {2: 40.0, 3: 25.0, 5: 10.0, 10: 55.0, 20: 100.0, 21: 2048.0}


class FakeGpu:
    """One GPU: a script of kernel-active readings, fixed other fields, GPM as asked."""

    def __init__(self, gpm_support: str | None = None, gpm_errors: dict[int, str] | None = None) -> None:
        self.ticks = 0
        self.support, self.errors = gpm_support, gpm_errors or {}
        self.gpm_calls = 0
        self.closed = False

    def read(self, name: str) -> float:
        if name == "gpu_util":
            value = UTIL[self.ticks % len(UTIL)]
            self.ticks += 1
            return value
        return {
            "power_w": 300.0,
            "mem_mb": 9216.0,
            "mem_total_mb": 24576.0,
            "sm_clock_mhz": 1980,
            "mem_clock_mhz": 10501,
            "temp_c": 71,
            "throttle": 0x4,
        }[name]

    def util_samples(self, since_us: int) -> list:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    def power_limit_w(self) -> float:
        return 575.0

    def name(self) -> str:
        return "NVIDIA FakeForce 5090"

    def process_mem_mb(self, pid: int) -> float:
        return 4096.0

    def gpm_support(self) -> str | None:
        return self.support

    def gpm_read(self, ids: list[int]) -> dict:
        self.gpm_calls += 1
        if self.gpm_calls == 1:
            return {}  # a GPM value needs two samples
        return {i: self.errors.get(i, GPM_VALUES[i]) for i in ids}

    def close(self) -> None:
        self.closed = True


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def session(gpu: FakeGpu, duration: float = 3.0, **kw):
    t = FakeTime()
    rows: list[str] = []
    result = monitor(gpu, 1.0, duration, on_row=rows.append, clock=t.clock, sleep=t.sleep, **kw)
    return result, rows


def test_the_summary_gives_mean_spread_and_the_seeds_fluctuation_figure() -> None:
    s, rows = session(FakeGpu(gpm_support="nvmlGpmQueryDeviceSupport: this GPU has no GPM (Hopper and newer have it)"))
    assert len(rows) == 4 and s.timeline.t_s == [0.0, 1.0, 2.0, 3.0] and s.stopped == "--duration 3 s"
    util = s.summary()["gpu_util"]
    assert util.mean == pytest.approx(0.7) and util.sd == pytest.approx(0.02**0.5)
    assert s.fluctuation() == pytest.approx(100 * 0.02**0.5)
    text = format_summary(s)
    assert "kernel-active time          mean     70.0 %     spread ±14.1  min 50.0  max 90.0" in text
    assert "70% ± 14.1 points (above its goal of < 10)" in text
    assert "power limit 575 W: mean draw 52% of it" in text
    assert "throttled: sw_power_cap 100% of samples" in text
    assert "GPM unavailable: nvmlGpmQueryDeviceSupport: this GPU has no GPM" in text
    assert "utilization" not in text.lower().replace("utilization.gpu", "")


def test_each_row_names_utilisation_kernel_active_time_and_power_against_the_limit() -> None:
    _, rows = session(FakeGpu(gpm_support="no"))
    assert rows[0] == (
        "kernel-active  50% | power 300/575 W (52%) | mem 9.0/24.0 GiB | 71 °C | SM 1980 MHz, mem 10501 MHz | "
        "throttle: sw_power_cap"
    )


def test_gpm_counters_are_sampled_where_the_gpu_has_them() -> None:
    s, rows = session(FakeGpu())
    summary = s.summary()
    assert summary["gpu_sm_util"].mean == pytest.approx(0.40) and summary["gpu_sm_util"].n == 3  # none at t=0
    assert summary["gpu_tensor_active"].mean == pytest.approx(0.10)
    assert summary["gpu_pcie_rx_mib_s"].mean == pytest.approx(2048.0)
    assert "GPM: SM utilisation 40%, SM occupancy 25%, tensor pipes active 10%" in rows[1]
    assert "see SM utilisation (GPM) above" in format_summary(s)


def test_gpm_selection_without_support_with_support_and_with_a_metric_that_fails() -> None:
    assert gpm.select(SimpleNamespace()).names == ()  # a backend without GPM calls
    assert gpm.select(FakeGpu(gpm_support="no GPM here")).why_not["gpu_sm_util"] == "no GPM here"
    assert gpm.select(FakeGpu()).names == GPM_NAMES
    gpu = FakeGpu(gpm_errors={5: "NVML error 3"})
    s, _ = session(gpu)
    assert "gpu_tensor_active" not in s.summary() and s.timeline.errors["gpu_tensor_active"] == "NVML error 3"
    assert "gpu_sm_util" in s.summary()


def test_the_runners_probe_carries_gpm_metrics_and_says_why_one_is_missing(monkeypatch) -> None:
    monkeypatch.setattr("perfsuite.probes.nvml._target_for", lambda device: ("index", 0))
    probe = NvmlProbe(backend_factory=lambda target: FakeGpu(gpm_errors={5: "NVML error 3"}), interval_s=10)
    probe.setup(SimpleNamespace(device="cuda:0", observe_steps=0))
    probe.start()
    probe.sampler.tick()
    probe.stop()
    m = {x.name: x for x in probe.metrics(WindowTimings(0.0, 1.0, 2, 1))}
    assert m["gpu_sm_util"].value == pytest.approx(0.40) and m["gpu_dram_bw_util"].value == pytest.approx(0.55)
    assert m["gpu_tensor_active"].value is None and "NVML error 3" in m["gpu_tensor_active"].reason
    assert m["gpu_util"].detail["meaning"].startswith("kernel-active time")
    assert "gpu_sm_util" in probe.timeline()


def test_a_gpu_without_gpm_leaves_the_probes_gpm_metrics_unavailable_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr("perfsuite.probes.nvml._target_for", lambda device: ("index", 0))
    probe = NvmlProbe(backend_factory=lambda target: FakeGpu(gpm_support="this GPU has no GPM"), interval_s=10)
    probe.setup(SimpleNamespace(device="cuda:0", observe_steps=0))
    probe.start()
    probe.stop()
    m = {x.name: x for x in probe.metrics(WindowTimings(0.0, 1.0, 2, 1))}
    assert all(m[n].value is None and "this GPU has no GPM" in m[n].reason for n in GPM_NAMES)
    assert m["gpu_power_w"].value == 300.0


def test_watching_a_process_stops_when_it_exits_and_shows_its_memory() -> None:
    checks = iter([True, True, False])
    s, rows = session(FakeGpu(gpm_support="no"), duration=None, pid=4242, alive=lambda pid: next(checks))
    assert s.stopped == "process 4242 exited" and len(rows) == 3 and "pid 4.0 GiB" in rows[0]
    assert "process 4242: GPU memory peak 4.00 GiB" in format_summary(s)


def test_ctrl_c_ends_the_session_with_its_summary() -> None:
    gpu = FakeGpu(gpm_support="no")

    def sleep(s: float) -> None:
        raise KeyboardInterrupt

    s = monitor(gpu, 1.0, None, clock=FakeTime().clock, sleep=sleep)
    assert s.stopped == "Ctrl-C" and len(s.timeline.t_s) == 1 and gpu.closed
    assert "1 samples over 0 s (Ctrl-C)" in format_summary(s)


def test_the_png_shows_the_readings(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    s, _ = session(FakeGpu())
    path = write_png(s, tmp_path / "gpu.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gpu.png"]


class NVMLError_LibraryNotFound(Exception):  # noqa: N801 - named as pynvml names it
    pass


class NVMLError_InvalidArgument(Exception):  # noqa: N801
    pass


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (NVMLError_LibraryNotFound("NVML Shared Library Not Found"), "no GPU driver: NVML cannot start"),
        (NVMLError_InvalidArgument("Invalid Argument"), "no GPU 3: NVML has no device at that index"),
        (RuntimeError("Insufficient Permissions"), "NVML could not open GPU 3: RuntimeError"),
    ],
    ids=["no-driver", "no-such-gpu", "other"],
)
def test_what_is_missing_is_said(error, message) -> None:
    def factory(target):
        raise error

    with pytest.raises(MonitorError, match=message):
        open_backend(3, factory)


def test_without_nvidia_ml_py_it_says_so(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(MonitorError, match="no NVML: the nvidia-ml-py package"):
        open_backend(0)


def test_the_command_exits_2_here_saying_which_is_missing(capsys) -> None:
    from perfsuite.cli.main import main

    try:
        open_backend(0).close()
    except MonitorError:
        pass
    else:
        pytest.skip("this machine has a GPU and a driver: perfsuite monitor would watch it")
    assert main(["monitor", "--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "no GPU driver" in err or "no NVML" in err


class FakePynvml:
    """Enough of pynvml's GPM calls to check the sample swapping and the request NvmlGpm builds."""

    NVML_SUCCESS = 0
    NVML_GPM_METRICS_GET_VERSION = 1

    def __init__(self) -> None:
        self.taken: list[int] = []
        self.freed: list[int] = []
        self.requests: list[tuple[int, int, list[int]]] = []
        self._n = 0

    def nvmlGpmQueryDeviceSupport(self, handle):
        return SimpleNamespace(isSupportedDevice=1)

    def nvmlGpmSampleAlloc(self):
        self._n += 1
        return self._n

    def nvmlGpmSampleGet(self, handle, sample):
        self.taken.append(sample)

    def c_nvmlGpmMetricsGet_t(self):
        return SimpleNamespace(metrics=[SimpleNamespace(metricId=0, value=0.0, nvmlReturn=0) for _ in range(8)])

    def nvmlGpmMetricsGet(self, get):
        self.requests.append((get.sample1, get.sample2, [m.metricId for m in get.metrics[: get.numMetrics]]))
        for m in get.metrics[: get.numMetrics]:
            m.value, m.nvmlReturn = (float(m.metricId), 0) if m.metricId != 5 else (0.0, 3)

    def nvmlGpmSampleFree(self, sample):
        self.freed.append(sample)


def test_the_pynvml_adapter_takes_one_sample_per_reading_and_compares_consecutive_ones() -> None:
    nv = FakePynvml()
    adapter = NvmlGpm(nv, handle="h")
    assert adapter.support() is None
    assert adapter.read([2, 5]) == {}
    assert adapter.read([2, 5]) == {2: 2.0, 5: "NVML error 3"}
    adapter.read([2])
    assert nv.taken == [1, 2, 1] and [(a, b) for a, b, _ in nv.requests] == [(1, 2), (2, 1)]
    adapter.close()
    assert sorted(nv.freed) == [1, 2]


def test_a_nan_gpm_reading_is_an_unavailable_metric_with_the_reason_not_a_crash(monkeypatch) -> None:
    """An H100 (driver 580.159) returned NaN for DRAM bandwidth utilisation: the run must still report."""
    monkeypatch.setattr("perfsuite.probes.nvml._target_for", lambda device: ("index", 0))
    probe = NvmlProbe(backend_factory=lambda target: FakeGpu(gpm_errors={10: float("nan")}), interval_s=10)
    probe.setup(SimpleNamespace(device="cuda:0", observe_steps=0))
    probe.start()
    probe.sampler.tick()
    probe.stop()
    m = {x.name: x for x in probe.metrics(WindowTimings(0.0, 1.0, 2, 1))}
    assert m["gpu_dram_bw_util"].value is None and "returned nan" in m["gpu_dram_bw_util"].reason
    assert m["gpu_sm_util"].value == pytest.approx(0.40)
