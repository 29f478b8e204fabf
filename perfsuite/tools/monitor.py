"""``perfsuite monitor``: a GPU's NVML readings, live, then their summary: the seeds' monitor_gpu.py, done with the
sampler the runner uses (perfsuite.probes.nvml.NvmlSampler), so what it shows is what a Result records.

Each tick reads kernel-active time (NVML's ``utilization.gpu``: the share of time *some* kernel ran,
which seed 003's "52% utilisation" was), power against the enforced limit, memory used and total,
temperature, SM and memory clocks and the active throttle reasons; on GPUs with GPM (Hopper and newer),
also SM utilisation and occupancy, tensor-pipe activity, DRAM bandwidth and PCIe traffic
(perfsuite.probes.gpm). At the end, per reading: mean, spread (standard deviation), minimum and maximum,
and the seeds' fluctuation figure: the standard deviation of kernel-active time in percentage points,
the "65% ± 15%" of seed 002's benchmark, whose goal was under 10.

Without NVML (nvidia-ml-py not installed), without a driver, or without a GPU, :func:`open_backend`
raises :class:`MonitorError` saying which is missing. Real NVML and GPM readings are unverified here:
no GPU was lent while this was written; the sampler, the summary and the GPM selection are tested
with a fake NVML.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from perfsuite.errors import PerfsuiteError
from perfsuite.probes.gpm import GPM_NAMES
from perfsuite.probes.nvml import THROTTLE_BITS, NvmlSampler, Timeline

# (series, label, scale for display, unit shown)
SHOWN: tuple[tuple[str, str, float, str], ...] = (
    ("gpu_util", "kernel-active time", 100.0, "%"),
    ("power_w", "power", 1.0, "W"),
    ("mem_mb", "memory used", 1 / 1024, "GiB"),
    ("temp_c", "temperature", 1.0, "°C"),
    ("sm_clock_mhz", "SM clock", 1.0, "MHz"),
    ("mem_clock_mhz", "memory clock", 1.0, "MHz"),
    ("gpu_sm_util", "SM utilisation (GPM)", 100.0, "%"),
    ("gpu_sm_occupancy", "SM occupancy (GPM)", 100.0, "%"),
    ("gpu_tensor_active", "tensor pipes active (GPM)", 100.0, "%"),
    ("gpu_dram_bw_util", "DRAM bandwidth (GPM)", 100.0, "%"),
    ("gpu_pcie_rx_mib_s", "PCIe rx (GPM)", 1.0, "MiB/s"),
    ("gpu_pcie_tx_mib_s", "PCIe tx (GPM)", 1.0, "MiB/s"),
)
FLUCTUATION_GOAL = 10.0  # seed 002: "波动幅度 <10%"


class MonitorError(PerfsuiteError):
    """No NVML, no driver, no GPU, or no such GPU: exit status 2, saying which."""


def open_backend(index: int, factory: Callable[[tuple[str, str | int]], Any] | None = None) -> Any:
    """An NVML backend for GPU ``index``, or MonitorError naming what is missing."""
    if factory is None:
        try:
            import pynvml  # noqa: F401
        except ImportError:
            raise MonitorError(
                "no NVML: the nvidia-ml-py package (import pynvml) is not installed; pip install nvidia-ml-py"
            ) from None
        from perfsuite.probes.nvml import NvmlBackend

        factory = NvmlBackend
    try:
        return factory(("index", index))
    except Exception as exc:  # noqa: BLE001 - every NVML failure becomes one sentence
        kind = type(exc).__name__
        if kind in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"):
            raise MonitorError(
                f"no GPU driver: NVML cannot start ({exc}): this machine has no NVIDIA driver loaded, so no GPU to "
                "watch; run perfsuite monitor on the GPU machine"
            ) from None
        if kind in ("NVMLError_InvalidArgument", "NVMLError_NotFound", "NVMLError_GpuNotFound"):
            raise MonitorError(
                f"no GPU {index}: NVML has no device at that index ({exc}); nvidia-smi -L lists them"
            ) from None
        raise MonitorError(f"NVML could not open GPU {index}: {kind}: {exc}") from None


@dataclass(frozen=True)
class Stats:
    """One reading over the session."""

    mean: float
    sd: float
    low: float
    high: float
    n: int


def stats(values: Sequence[float | int | None]) -> Stats | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    return Stats(mean, sd, min(xs), max(xs), len(xs))


@dataclass
class Session:
    """What one monitor session saw."""

    timeline: Timeline
    limit_w: float | None
    gpu: str
    gpm_why_not: dict[str, str]
    stopped: str
    pid: int | None = None
    pid_mem_mb: list[float | None] = field(default_factory=list)

    def summary(self) -> dict[str, Stats]:
        return {name: s for name, *_ in SHOWN if (s := stats(self.timeline.values.get(name, []))) is not None}

    def fluctuation(self) -> float | None:
        """Standard deviation of kernel-active time, in percentage points (seed 002's "± x%")."""
        s = stats(self.timeline.values.get("gpu_util", []))
        return None if s is None else s.sd * 100.0

    def throttle(self) -> dict[str, float]:
        masks = [int(m) for m in self.timeline.values.get("throttle", []) if m is not None]
        if not masks:
            return {}
        return {
            name: sum(1 for m in masks if m & bit) / len(masks)
            for bit, name in THROTTLE_BITS.items()
            if any(m & bit for m in masks)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "power_limit_w": self.limit_w,
            "stopped": self.stopped,
            "samples": len(self.timeline.t_s),
            "summary": {name: vars(s) for name, s in self.summary().items()},
            "fluctuation_points": self.fluctuation(),
            "throttle_reasons": self.throttle(),
            "gpm_unavailable": self.gpm_why_not,
            "pid": self.pid,
            "timeline": {
                "t_s": self.timeline.t_s,
                **{k: v for k, v in self.timeline.values.items() if any(x is not None for x in v)},
            },
        }


def row_text(tl: Timeline, i: int, limit_w: float | None, pid_mem: float | None = None) -> str:
    """One line per tick: every reading the GPU gave at that tick."""

    def at(name: str) -> Any:
        values = tl.values.get(name, [])
        return values[i] if i < len(values) else None

    parts = []
    if (u := at("gpu_util")) is not None:
        parts.append(f"kernel-active {u * 100:3.0f}%")
    if (p := at("power_w")) is not None:
        parts.append(f"power {p:.0f}/{limit_w:.0f} W ({p / limit_w:.0%})" if limit_w else f"power {p:.0f} W")
    if (m := at("mem_mb")) is not None:
        total = at("mem_total_mb")
        parts.append(f"mem {m / 1024:.1f}/{total / 1024:.1f} GiB" if total else f"mem {m / 1024:.1f} GiB")
    if pid_mem is not None:
        parts.append(f"pid {pid_mem / 1024:.1f} GiB")
    if (t := at("temp_c")) is not None:
        parts.append(f"{t:.0f} °C")
    if (c := at("sm_clock_mhz")) is not None:
        mem_clock = at("mem_clock_mhz")
        parts.append(f"SM {c:.0f} MHz" + (f", mem {mem_clock:.0f} MHz" if mem_clock is not None else ""))
    if (mask := at("throttle")) is not None:
        active = [n for bit, n in THROTTLE_BITS.items() if int(mask) & bit and n != "gpu_idle"]
        parts.append("throttle: " + ",".join(active) if active else "no throttle")
    gpm = [
        f"{label.split(' (')[0]} {v * scale:.0f}{unit if unit == '%' else ' ' + unit}"
        for name, label, scale, unit in SHOWN
        if name in GPM_NAMES and (v := at(name)) is not None
    ]
    if gpm:
        parts.append("GPM: " + ", ".join(gpm))
    return " | ".join(parts) if parts else "no reading"


def monitor(
    backend: Any,
    interval_s: float = 1.0,
    duration_s: float | None = None,
    pid: int | None = None,
    on_row: Callable[[str], None] = lambda text: None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    alive: Callable[[int], bool] = psutil.pid_exists,
) -> Session:
    """Sample every ``interval_s`` until ``duration_s`` has passed, ``pid`` has exited, or Ctrl-C; summarise."""
    sampler = NvmlSampler(backend, interval_s, clock)
    limit = _safe(backend.power_limit_w)
    gpu = _safe(getattr(backend, "name", lambda: "GPU")) or "GPU"
    pid_mem: list[float | None] = []
    stopped = "Ctrl-C"
    try:
        sampler.begin()
        while True:
            if pid is not None:
                pid_mem.append(_safe(lambda: backend.process_mem_mb(pid)))
            on_row(row_text(sampler.timeline, len(sampler.timeline.t_s) - 1, limit, pid_mem[-1] if pid_mem else None))
            elapsed = clock() - sampler.start_s
            if duration_s is not None and elapsed + 1e-9 >= duration_s:
                stopped = f"--duration {duration_s:g} s"
                break
            if pid is not None and not alive(pid):
                stopped = f"process {pid} exited"
                break
            sleep(interval_s)
            sampler.tick()
    except KeyboardInterrupt:
        stopped = "Ctrl-C"
    finally:
        with contextlib.suppress(Exception):  # closing NVML must not hide the summary
            backend.close()
    return Session(sampler.timeline, limit, str(gpu), dict(sampler.gpm.why_not), stopped, pid, pid_mem)


def _safe(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:  # noqa: BLE001 - a reading this GPU does not give
        return None


def format_summary(session: Session) -> str:
    """Mean, spread, minimum and maximum per reading, the fluctuation figure, throttling, and what GPM lacked."""
    tl = session.timeline
    seconds = tl.t_s[-1] if tl.t_s else 0.0
    lines = [f"perfsuite monitor: {session.gpu}, {len(tl.t_s)} samples over {seconds:.0f} s ({session.stopped})"]
    summary = session.summary()
    for name, label, scale, unit in SHOWN:
        s = summary.get(name)
        if s is None:
            continue
        lines.append(
            f"  {label:<27} mean {s.mean * scale:8.1f} {unit:<5} spread ±{s.sd * scale:.1f}  "
            f"min {s.low * scale:.1f}  max {s.high * scale:.1f}"
        )
    if session.limit_w and "power_w" in summary:
        share = summary["power_w"].mean / session.limit_w
        lines.append(f"  power limit {session.limit_w:.0f} W: mean draw {share:.0%} of it")
    fluct = session.fluctuation()
    if fluct is not None:
        u = summary["gpu_util"]
        steady = "within" if fluct < FLUCTUATION_GOAL else "above"
        lines.append(
            f"  fluctuation (seed 002's '± x%'): kernel-active time {u.mean * 100:.0f}% ± {fluct:.1f} points "
            f"({steady} its goal of < {FLUCTUATION_GOAL:g}); kernel-active time is not SM utilisation"
            + (": see SM utilisation (GPM) above" if "gpu_sm_util" in summary else "")
        )
    throttle = session.throttle()
    if throttle:
        lines.append("  throttled: " + ", ".join(f"{n} {f:.0%} of samples" for n, f in throttle.items()))
    missing = sorted(set(session.gpm_why_not.values()))
    if missing:
        lines.append(f"  GPM unavailable: {'; '.join(missing)}")
    seen = [m for m in session.pid_mem_mb if m is not None]
    if session.pid is not None:
        held = f"peak {max(seen) / 1024:.2f} GiB" if seen else "none seen"
        lines.append(f"  process {session.pid}: GPU memory {held}")
    return "\n".join(lines)


def write_png(session: Session, path: Path) -> Path:
    """The readings over time: kernel-active time (and GPM SM utilisation), power against its limit, memory, clocks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perfsuite.core.tmpfiles import make_temp_file

    tl = session.timeline
    t = tl.t_s
    panels = [
        (
            ("gpu_util", "kernel-active time"),
            ("gpu_sm_util", "SM utilisation (GPM)"),
            ("gpu_tensor_active", "tensor pipes active (GPM)"),
        ),
        (("power_w", "power W"),),
        (("mem_mb", "memory used MiB"),),
        (("sm_clock_mhz", "SM MHz"), ("mem_clock_mhz", "memory MHz")),
    ]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.2 * len(panels)), sharex=True)
    for ax, series in zip(axes, panels):
        for name, label in series:
            ys = tl.values.get(name, [])
            points = [(x, y) for x, y in zip(t, ys) if y is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], label=label)
        if series[0][0] == "power_w" and session.limit_w:
            ax.axhline(session.limit_w, color="grey", linestyle="--", label=f"limit {session.limit_w:.0f} W")
        if series[0][0] in ("power_w", "mem_mb"):
            ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize=8)
    axes[0].set_ylim(0, 1.05)
    axes[-1].set_xlabel("seconds")
    fig.suptitle(f"perfsuite monitor: {session.gpu}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = make_temp_file(path.parent, path.stem, suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
