"""Probes: each watches a run and contributes metrics under their one name.

One concern per module: datawait (data_wait_frac), nvml (GPU telemetry),
syncs (syncs_per_step), compile (graph_breaks, recompiles, compile_s), amp
(amp_engaged, amp_lowp_frac, grad_scaler_bf16), loader (the loader ledger: CPU time per sample by process
and by stage, main_load_ms_per_step, capacity), loadercount (the loader's work per sample, exactly), cost
(ops_per_step, h2d_bytes_per_step, flops_per_step, input_format), memory (peak_mem_mb, peak_rss_mb), contention
(CPU pressure, steal, neighbours, run queue into Result.environment; step_cpu_ms), settings (cuDNN, TF32,
threads and where the loader was built, into Result.environment). Each reports
``Metric.unavailable`` with a reason where it cannot measure, never raises.
"""

from __future__ import annotations

from perfsuite.errors import JobError
from perfsuite.probes.base import Probe, RunContext, WindowTimings

PROBE_GROUP = "perfsuite.probes"


def all_probes() -> list[Probe]:
    """A fresh instance of every built-in probe."""
    from perfsuite.probes.amp import AmpProbe
    from perfsuite.probes.compile import CompileProbe
    from perfsuite.probes.contention import ContentionProbe
    from perfsuite.probes.cost import CostProbe
    from perfsuite.probes.datawait import DataWaitProbe
    from perfsuite.probes.labels import LabelProbe
    from perfsuite.probes.loader import LoaderProbe
    from perfsuite.probes.loadercount import LoaderCountProbe
    from perfsuite.probes.memory import MemoryProbe
    from perfsuite.probes.nvml import NvmlProbe
    from perfsuite.probes.settings import SettingsProbe
    from perfsuite.probes.syncs import SyncProbe

    return [
        ContentionProbe(),  # first: its begin_after_window() closes the speed-of-light interval before any other's
        DataWaitProbe(),
        LoaderProbe(),
        LoaderCountProbe(),
        NvmlProbe(),
        SyncProbe(),
        CompileProbe(),
        AmpProbe(),
        CostProbe(),
        MemoryProbe(),
        LabelProbe(),
        SettingsProbe(),
    ]


def entry_point_probes() -> list[Probe]:
    """Fresh instances of the probes declared under the ``perfsuite.probes`` entry-point group."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=PROBE_GROUP):
        obj = ep.load()
        probe = obj() if callable(obj) else obj
        if not isinstance(probe, Probe):
            raise JobError(
                f"entry point {ep.name} = {ep.value} ({PROBE_GROUP}) made a {type(probe).__name__}, "
                "not a perfsuite.Probe"
            )
        out.append(probe)
    return out


__all__ = ["PROBE_GROUP", "Probe", "RunContext", "WindowTimings", "all_probes", "entry_point_probes"]
