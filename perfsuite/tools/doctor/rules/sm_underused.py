"""The GPU busy but its SMs not: NVML's utilisation high (some kernel ran nearly all the time) while GPM's SM
activity is low (those kernels kept few of the SMs working). The step is the GPU's, and it is small or unfused:
a larger batch, torch.compile or channels_last gives the SMs more to do.

Recorded on an H200 (face_parsing at full scale, tuned): gpu_util 0.97 beside gpu_sm_util 0.53.
"""

from __future__ import annotations

from perfsuite.core.results import Metric
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Unavailable
from perfsuite.tools.doctor.rules.base import Rule

BUSY = 0.9  # NVML utilisation at or above this: a kernel ran nearly all the time
SM_LOW = 0.6  # GPM SM activity below this: most of that time, fewer than this share of the SMs worked


def mean_of(e: Evidence, name: str) -> float | None:
    """The runs' mean of a metric, or None where any run lacks it (a CPU run; no NVML or no GPM)."""
    values = [known_value(r.metric(name)) for r in e.results]
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got and len(got) == len(values) else None


def known_value(m: Metric) -> float | None:
    return float(m.value) if m.available and isinstance(m.value, (int, float)) else None


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    util, sm = mean_of(e, "gpu_util"), mean_of(e, "gpu_sm_util")
    if util is None or sm is None or util < BUSY or sm >= SM_LOW:
        return []
    knobs = e.last.knobs
    fixes = ["a larger batch (more work per kernel)"]
    fixes.append("compile='default' (torch.compile: fused kernels)" if "compile" in knobs else "torch.compile")
    if knobs.get("channels_last") is not True:
        fixes.append("channels_last=True" if "channels_last" in knobs else "channels_last (memory_format)")
    return [
        Finding(
            f"GPU busy but its SMs not: NVML utilisation {util:.0%}, SM activity {sm:.0%}",
            f"NVML's gpu_util {util:.0%} is the share of time some kernel ran; GPM's gpu_sm_util {sm:.0%} is the "
            f"share of the SMs that worked: the kernels keep the GPU occupied but leave {1 - sm:.0%} of its SMs idle",
            "; ".join(fixes),
            "sm",
            Unavailable("the gain of a larger batch or compile depends on the model: measure it with perfsuite ab"),
            Unavailable("not tried: a change to the step"),
        )
    ]


RULE = Rule("sm_underused", find)
