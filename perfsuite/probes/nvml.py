"""GPU telemetry from NVML: gpu_util, gpu_power_w, gpu_mem_mb, sm_clock_mhz (+ temperature, throttling), and
GPM's SM, tensor-pipe, DRAM and PCIe counters where the GPU has them (perfsuite.probes.gpm).

The seeds judge their GPUs by nvidia-smi: "300 W of 575 W", "52% utilisation".
These are the same counters, sampled over the measured window by a background
thread, for the GPU the run actually uses. ``perfsuite monitor`` uses the same
sampler (:class:`NvmlSampler`) on its own. gpu_util is NVML's fraction of time
*some* kernel was running, shown as "kernel-active time": it says nothing of how
many SMs worked (gpu_sm_util, from GPM, does); where the driver keeps buffered samples
(nvmlDeviceGetSamples) they are used, since they cover the window at the
driver's own rate, otherwise the polled value.

The device: torch's index is mapped to NVML through the device UUID (torch
knows it; CUDA_VISIBLE_DEVICES may list UUIDs or indices, and CUDA's order
need not be NVML's), falling back to the CUDA_VISIBLE_DEVICES entry, then to
the index. Everything that talks to pynvml is in NvmlBackend, so the sampler
is tested against a fake. Any field can fail on some GPUs (power on some
boards, samples on MIG); a failing field is recorded as missing, and a metric
whose field never read is unavailable with the NVML error as its reason.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from perfsuite.core.results import Metric
from perfsuite.probes import gpm
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.gpm import GPM_NAMES
from perfsuite.probes.ticker import Ticker

FIELDS = ("gpu_util", "power_w", "mem_mb", "mem_total_mb", "sm_clock_mhz", "mem_clock_mhz", "temp_c", "throttle")
TIMELINE_KEYS = ("gpu_util", "power_w", "mem_mb", "sm_clock_mhz", "mem_clock_mhz", "temp_c", *GPM_NAMES)
KERNEL_ACTIVE = "kernel-active time: the share of time some kernel ran (NVML utilization.gpu), not how many SMs worked"
# nvmlClocksEventReason* bits (NVML API reference), named as nvidia-smi -q does.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class Backend(Protocol):
    """What the sampler needs from NVML, for one device. Each read may raise."""

    def read(self, name: str) -> float | int:
        """One current value of a FIELDS name (gpu_util as a 0..1 fraction, throttle as a bitmask)."""

    def util_samples(self, since_us: int) -> list[tuple[int, float]]:
        """Driver-buffered (timestamp µs, 0..1) utilisation samples newer than ``since_us``."""

    def power_limit_w(self) -> float: ...

    def close(self) -> None: ...

    # Optional (perfsuite.probes.gpm): gpm_support() -> None or why not; gpm_read(ids) -> {id: value or error}.


def nvml_target(torch_index: int, visible: str | None, torch_uuid: str | None) -> tuple[str, str | int]:
    """How to find torch's device ``torch_index`` in NVML: ("uuid", "GPU-...") or ("index", n)."""
    if torch_uuid:
        uuid = torch_uuid if torch_uuid.startswith(("GPU-", "MIG-")) else f"GPU-{torch_uuid}"
        return "uuid", uuid
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if visible is not None and torch_index < len(entries):
        entry = entries[torch_index]
        return ("index", int(entry)) if entry.isdigit() else ("uuid", entry)
    return "index", torch_index


class NvmlBackend:
    """The thin adapter over pynvml (nvidia-ml-py)."""

    def __init__(self, target: tuple[str, str | int]) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        try:
            kind, key = target
            if kind == "index":
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(int(key))
            else:
                self.handle = self._by_uuid(str(key))
        except Exception:
            pynvml.nvmlShutdown()
            raise
        self._gpm = gpm.NvmlGpm(pynvml, self.handle)

    def _by_uuid(self, uuid: str) -> Any:
        """Full UUIDs directly; CUDA_VISIBLE_DEVICES may hold a unique prefix."""
        nv = self.nv
        try:
            return nv.nvmlDeviceGetHandleByUUID(uuid)
        except nv.NVMLError:
            for i in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(i)
                found = nv.nvmlDeviceGetUUID(handle)
                if (found.decode() if isinstance(found, bytes) else found).startswith(uuid):
                    return handle
            raise

    def read(self, name: str) -> float | int:
        nv, h = self.nv, self.handle
        if name == "gpu_util":
            return nv.nvmlDeviceGetUtilizationRates(h).gpu / 100.0
        if name == "power_w":
            return nv.nvmlDeviceGetPowerUsage(h) / 1000.0
        if name == "mem_mb":
            return nv.nvmlDeviceGetMemoryInfo(h).used / 2**20
        if name == "mem_total_mb":
            return nv.nvmlDeviceGetMemoryInfo(h).total / 2**20
        if name == "sm_clock_mhz":
            return nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        if name == "mem_clock_mhz":
            return nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
        if name == "temp_c":
            return nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        if name == "throttle":  # renamed from ...ThrottleReasons in newer NVML
            reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            return (reasons or nv.nvmlDeviceGetCurrentClocksThrottleReasons)(h)
        raise KeyError(name)

    def util_samples(self, since_us: int) -> list[tuple[int, float]]:
        nv = self.nv
        try:
            kind, samples = nv.nvmlDeviceGetSamples(self.handle, nv.NVML_GPU_UTILIZATION_SAMPLES, since_us)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == nv.NVML_ERROR_NOT_FOUND:  # no new samples since since_us
                return []
            raise
        attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(kind, "uiVal")
        return [(int(s.timeStamp), getattr(s.sampleValue, attr) / 100.0) for s in samples]

    def power_limit_w(self) -> float:
        return self.nv.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0

    def gpm_support(self) -> str | None:
        return self._gpm.support()

    def gpm_read(self, ids: list[int]) -> dict[int, Any]:
        return self._gpm.read(ids)

    def name(self) -> str:
        found = self.nv.nvmlDeviceGetName(self.handle)
        return found.decode() if isinstance(found, bytes) else str(found)

    def process_mem_mb(self, pid: int) -> float | None:
        """GPU memory NVML says process ``pid`` holds on this device; None when it holds none here."""
        for proc in self.nv.nvmlDeviceGetComputeRunningProcesses(self.handle):
            if proc.pid == pid and proc.usedGpuMemory is not None:
                return proc.usedGpuMemory / 2**20
        return None

    def close(self) -> None:
        self._gpm.close()
        self.nv.nvmlShutdown()


@dataclass
class Timeline:
    """One row per tick; None where a field failed on that tick."""

    t_s: list[float] = field(default_factory=list)
    values: dict[str, list[float | int | None]] = field(default_factory=lambda: {f: [] for f in (*FIELDS, *GPM_NAMES)})
    errors: dict[str, str] = field(default_factory=dict)  # field -> last error
    buffered: dict[int, float] = field(default_factory=dict)  # driver samples: timestamp µs -> util


class NvmlSampler:
    """Background sampling thread: a sample at start, every ``interval_s``, and one at stop.

    The thread never raises: a failing read is a missing value. ``stop()`` is
    idempotent and joins the thread, so it is safe in a ``finally``.
    """

    def __init__(self, backend: Backend, interval_s: float = 0.1, clock: Callable[[], float] = time.time) -> None:
        self.backend = backend
        self.interval_s = interval_s
        self.clock = clock
        self.timeline = Timeline()
        self.start_s = self.end_s = 0.0
        self._last_us = 0
        self._ticker = Ticker(self.tick, interval_s, "perfsuite-nvml")
        self.buffered_error: str | None = None
        self.gpm = gpm.select(backend)

    def tick(self) -> None:
        now = self.clock()
        tl = self.timeline
        tl.t_s.append(now - self.start_s)
        for name in FIELDS:
            try:
                value: float | int | None = self.backend.read(name)
            except Exception as exc:  # noqa: BLE001 - a field some GPUs lack, or a transient failure
                value, tl.errors[name] = None, f"{type(exc).__name__}: {exc}"
            tl.values[name].append(value)
        self._tick_gpm()
        if self.buffered_error is None:
            try:
                for stamp, util in self.backend.util_samples(self._last_us):
                    tl.buffered[stamp] = util
                    self._last_us = max(self._last_us, stamp)
            except Exception as exc:  # noqa: BLE001 - no buffered samples: fall back to polling
                self.buffered_error = f"{type(exc).__name__}: {exc}"

    def _tick_gpm(self) -> None:
        """GPM counters over the interval since the last tick (none on the first: a value needs two samples)."""
        tl = self.timeline
        readings: dict[str, float | str] = {}
        if self.gpm.active:
            try:
                readings = gpm.read(self.backend, self.gpm)
            except Exception as exc:  # noqa: BLE001 - a failed GPM sample is missing values, never a failed run
                readings = dict.fromkeys(self.gpm.names, f"{type(exc).__name__}: {exc}")
        for name in GPM_NAMES:
            value = readings.get(name)
            if isinstance(value, str):
                tl.errors[name], value = value, None
            tl.values[name].append(value)

    def begin(self) -> None:
        """Mark the start (t = 0) and take the first sample, without the background thread (perfsuite monitor)."""
        self.start_s = self.clock()
        self._last_us = int(self.start_s * 1e6)
        self.tick()

    def start(self) -> None:
        self.begin()
        self._ticker.start()

    def stop(self) -> None:
        if not self._ticker.stop():
            return
        self.end_s = self.clock()
        self.tick()

    def window_util(self) -> list[float]:
        """Buffered utilisation samples that fall inside the window."""
        lo, hi = self.start_s * 1e6, self.end_s * 1e6
        return [u for stamp, u in sorted(self.timeline.buffered.items()) if lo <= stamp <= hi]


def _present(values: list[Any]) -> list[float]:
    return [v for v in values if v is not None]


class NvmlProbe(Probe):
    """GPU telemetry over the measured window; unavailable with a reason off CUDA or without NVML."""

    name = "nvml"

    def __init__(
        self, backend_factory: Callable[[tuple[str, str | int]], Backend] | None = None, interval_s: float = 0.1
    ) -> None:
        self.backend_factory = backend_factory or NvmlBackend
        self.interval_s = interval_s
        self.sampler: NvmlSampler | None = None
        self.backend: Backend | None = None
        self.why_not: str | None = "setup() was not called"
        self.target: tuple[str, str | int] | None = None
        self.limit_w: float | None = None

    def setup(self, ctx: RunContext) -> None:
        self.sampler, self.backend, self.why_not, self.limit_w = None, None, None, None
        if not ctx.device.startswith("cuda"):
            self.why_not = f"device={ctx.device}: GPU telemetry needs a CUDA device"
            return
        try:
            self.target = _target_for(ctx.device)
            self.backend = self.backend_factory(self.target)
        except ImportError:
            self.why_not = "no NVML: nvidia-ml-py (import pynvml) is not installed"
        except Exception as exc:  # noqa: BLE001 - no driver, no such device, permissions
            self.why_not = f"no NVML: {type(exc).__name__}: {exc}"

    def start(self) -> None:
        if self.backend is not None:
            try:
                self.limit_w = self.backend.power_limit_w()
            except Exception:  # noqa: BLE001 - the limit is context, not a metric
                self.limit_w = None
            self.sampler = NvmlSampler(self.backend, self.interval_s)
            self.sampler.start()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        if self.backend is not None:
            backend, self.backend = self.backend, None
            with contextlib.suppress(Exception):  # shutting down telemetry must not fail the run
                backend.close()

    def timeline(self) -> dict[str, list[float]]:
        """Aligned series for Result.timeline; ticks where a kept field failed are dropped."""
        if self.sampler is None:
            return {}
        tl = self.sampler.timeline
        keys = [k for k in TIMELINE_KEYS if _present(tl.values[k])]
        rows = [i for i in range(len(tl.t_s)) if all(tl.values[k][i] is not None for k in keys)]
        out = {"t_s": [tl.t_s[i] for i in rows]}
        out.update({k: [float(tl.values[k][i]) for i in rows] for k in keys})  # type: ignore[arg-type]
        return out

    def _gpm_metrics(self) -> list[Metric]:
        """The GPM counters' window means; unavailable with the reason where the GPU or the driver has none."""
        out = []
        for name in GPM_NAMES:
            unit = gpm.UNITS[name]
            if self.sampler is None:
                out.append(Metric.unavailable(name, self.why_not or "the measured window never started", unit))
                continue
            values = _present(self.sampler.timeline.values[name])
            if values:
                out.append(
                    Metric(
                        name,
                        sum(values) / len(values),
                        unit,
                        detail={"max": max(values), "samples": len(values), "source": "NVML GPM"},
                    )
                )
            else:
                why = self.sampler.gpm.why_not.get(name) or self.sampler.timeline.errors.get(name)
                out.append(Metric.unavailable(name, f"no GPM reading: {why or 'the window was too short'}", unit))
        return out

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        names = (("gpu_util", "fraction"), ("gpu_power_w", "W"), ("gpu_mem_mb", "MB"), ("sm_clock_mhz", "MHz"))
        if self.sampler is None:
            why = self.why_not or "the measured window never started"
            return [Metric.unavailable(n, why, unit) for n, unit in names] + self._gpm_metrics()
        tl = self.sampler.timeline

        def missing(name: str, field_name: str, unit: str) -> Metric:
            error = tl.errors.get(field_name, "no samples")
            return Metric.unavailable(name, f"NVML returned no {field_name} samples ({error})", unit)

        out: list[Metric] = [self._util(missing)]
        power = _present(tl.values["power_w"])
        if power:
            limit = self.limit_w
            out.append(
                Metric(
                    "gpu_power_w",
                    sum(power) / len(power),
                    "W",
                    detail={
                        "mean": sum(power) / len(power),
                        "max": max(power),
                        "limit_w": limit,
                        "frac_of_limit": (sum(power) / len(power) / limit) if limit else None,
                    },
                )
            )
        else:
            out.append(missing("gpu_power_w", "power_w", "W"))
        mem = _present(tl.values["mem_mb"])
        out.append(
            Metric("gpu_mem_mb", max(mem), "MB", detail={"mean": sum(mem) / len(mem), "max": max(mem)})
            if mem
            else missing("gpu_mem_mb", "mem_mb", "MB")
        )
        clock = _present(tl.values["sm_clock_mhz"])
        if clock:
            temps = _present(tl.values["temp_c"])
            out.append(
                Metric(
                    "sm_clock_mhz",
                    sum(clock) / len(clock),
                    "MHz",
                    detail={
                        "min": min(clock),
                        "max": max(clock),
                        "temp_c": {"mean": sum(temps) / len(temps), "max": max(temps)} if temps else None,
                        "throttle_reasons": _throttle_summary(_present(tl.values["throttle"])),
                        "target": list(self.target) if self.target else None,
                    },
                )
            )
        else:
            out.append(missing("sm_clock_mhz", "sm_clock_mhz", "MHz"))
        return out + self._gpm_metrics()

    def _util(self, missing: Callable[[str, str, str], Metric]) -> Metric:
        assert self.sampler is not None
        buffered = self.sampler.window_util()
        if buffered:
            return Metric(
                "gpu_util",
                sum(buffered) / len(buffered),
                "fraction",
                detail={
                    "source": "nvmlDeviceGetSamples (driver-buffered)",
                    "samples": len(buffered),
                    "meaning": KERNEL_ACTIVE,
                },
            )
        polled = _present(self.sampler.timeline.values["gpu_util"])
        if not polled:
            return missing("gpu_util", "gpu_util", "fraction")
        return Metric(
            "gpu_util",
            sum(polled) / len(polled),
            "fraction",
            detail={
                "source": "polled nvmlDeviceGetUtilizationRates",
                "samples": len(polled),
                "meaning": KERNEL_ACTIVE,
                "buffered_unavailable": self.sampler.buffered_error,
            },
        )


def _throttle_summary(masks: list[int | float]) -> dict[str, float]:
    """Reason -> fraction of samples in which it was active."""
    if not masks:
        return {}
    return {
        name: sum(1 for m in masks if int(m) & bit) / len(masks)
        for bit, name in THROTTLE_BITS.items()
        if any(int(m) & bit for m in masks)
    }


def _target_for(device: str) -> tuple[str, str | int]:
    """Torch's device for this run, as an NVML lookup (see nvml_target)."""
    import torch

    index = torch.device(device).index
    if index is None:
        index = torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return nvml_target(index, os.environ.get("CUDA_VISIBLE_DEVICES"), str(uuid) if uuid else None)
