"""GPU Performance Monitoring (GPM, NVML on Hopper and newer): what the SMs, tensor pipes, DRAM and PCIe did.

NVML's ``utilization.gpu`` (``gpu_util``) is the share of time *some* kernel ran: one tiny kernel
at a time reads 100%. GPM counts what the hardware did in an interval, between two samples:

======================  ==========================================  ================================
metric                  NVML GPM metric                             what it says
======================  ==========================================  ================================
``gpu_sm_util``         ``NVML_GPM_METRIC_SM_UTIL``                 share of SMs busy
``gpu_sm_occupancy``    ``NVML_GPM_METRIC_SM_OCCUPANCY``            warps resident / the SMs' maximum
``gpu_tensor_active``   ``NVML_GPM_METRIC_ANY_TENSOR_UTIL``         share of time any tensor pipe ran
``gpu_dram_bw_util``    ``NVML_GPM_METRIC_DRAM_BW_UTIL``            DRAM bandwidth used / peak
``gpu_pcie_rx_mib_s``   ``NVML_GPM_METRIC_PCIE_RX_PER_SEC``         host -> GPU traffic, MiB/s
``gpu_pcie_tx_mib_s``   ``NVML_GPM_METRIC_PCIE_TX_PER_SEC``         GPU -> host traffic, MiB/s
======================  ==========================================  ================================

Selection (:func:`select`): a device whose ``nvmlGpmQueryDeviceSupport`` says no (before Hopper, or a
driver without GPM) gets none, with that reason; on one that says yes, every metric is sampled, and one
that never reads is unavailable with its NVML error. Percentages become fractions, as ``gpu_util`` is one.

Not yet run on a GPU here: the pynvml calls follow nvidia-ml-py's own GPM sample code (alloc two samples,
get one per reading, ``nvmlGpmMetricsGet`` between them), and the logic around them is tested with a fake.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

# (metric name, NVML GPM metric id, scale to our unit, unit)
GPM_METRICS: tuple[tuple[str, int, float, str], ...] = (
    ("gpu_sm_util", 2, 0.01, "fraction"),
    ("gpu_sm_occupancy", 3, 0.01, "fraction"),
    ("gpu_tensor_active", 5, 0.01, "fraction"),
    ("gpu_dram_bw_util", 10, 0.01, "fraction"),
    ("gpu_pcie_rx_mib_s", 21, 1.0, "MiB/s"),
    ("gpu_pcie_tx_mib_s", 20, 1.0, "MiB/s"),
)
GPM_NAMES = tuple(name for name, *_ in GPM_METRICS)
UNITS = {name: unit for name, _, _, unit in GPM_METRICS}


@dataclass
class Selection:
    """The GPM metrics this device gives, and why the others are missing."""

    names: tuple[str, ...] = ()
    why_not: dict[str, str] = field(default_factory=dict)  # metric -> reason

    @property
    def active(self) -> bool:
        return bool(self.names)


def select(backend: Any) -> Selection:
    """The GPM metrics to sample: all of them where ``backend.gpm_support()`` says GPM works (None), else none.

    A backend without GPM calls (an older fake, a MIG slice) has none. A metric the device then does not
    give shows as errors in its readings (:func:`read`), and the probe reports it unavailable with them.
    """
    support = getattr(backend, "gpm_support", None)
    if support is None:
        return Selection(why_not={n: "this NVML backend has no GPM" for n in GPM_NAMES})
    try:
        reason = support()
    except Exception as exc:  # noqa: BLE001 - an old driver without the call
        reason = f"nvmlGpmQueryDeviceSupport failed: {type(exc).__name__}: {exc}"
    if reason:
        return Selection(why_not={n: reason for n in GPM_NAMES})
    return Selection(GPM_NAMES)


def read(backend: Any, selection: Selection) -> dict[str, float | str]:
    """One reading of the selected metrics, in our units, or the error text of each that failed.

    GPM values cover the interval since the previous reading; the first reading has none ({}).
    """
    ids = {name: (metric_id, scale) for name, metric_id, scale, _ in GPM_METRICS if name in selection.names}
    raw = backend.gpm_read([metric_id for metric_id, _ in ids.values()])
    if not raw:
        return {}
    out: dict[str, float | str] = {}
    for name, (metric_id, scale) in ids.items():
        value = raw.get(metric_id)
        if isinstance(value, (int, float)) and math.isfinite(value):
            out[name] = float(value) * scale
        elif isinstance(value, (int, float)):  # seen on an H100 (driver 580): NaN for DRAM bandwidth, some intervals
            out[name] = f"NVML GPM returned {value} for metric id {metric_id}"
        else:
            out[name] = str(value)
    return out


class NvmlGpm:
    """The pynvml side of GPM for one device handle: two samples, swapped every reading."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self.nv, self.handle = nv, handle
        self._prev: Any = None
        self._samples: list[Any] = []

    def support(self) -> str | None:
        nv = self.nv
        if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            return "nvidia-ml-py has no GPM calls (nvidia-ml-py >= 11.525 has them)"
        if not nv.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice:
            return "nvmlGpmQueryDeviceSupport: this GPU has no GPM (Hopper and newer have it)"
        return None

    def read(self, ids: list[int]) -> dict[int, Any]:
        nv = self.nv
        if not self._samples:
            self._samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
        current = self._samples[1] if self._prev is self._samples[0] else self._samples[0]
        nv.nvmlGpmSampleGet(self.handle, current)
        prev, self._prev = self._prev, current
        if prev is None:
            return {}
        get = nv.c_nvmlGpmMetricsGet_t()
        get.version = nv.NVML_GPM_METRICS_GET_VERSION
        get.numMetrics = len(ids)
        get.sample1, get.sample2 = prev, current
        for i, metric_id in enumerate(ids):
            get.metrics[i].metricId = metric_id
        nv.nvmlGpmMetricsGet(get)
        out: dict[int, Any] = {}
        for i, metric_id in enumerate(ids):
            m = get.metrics[i]
            out[metric_id] = float(m.value) if m.nvmlReturn == nv.NVML_SUCCESS else f"NVML error {m.nvmlReturn}"
        return out

    def close(self) -> None:
        for sample in self._samples:
            with contextlib.suppress(Exception):  # freeing at shutdown must not fail the run
                self.nv.nvmlGpmSampleFree(sample)
        self._samples = []
