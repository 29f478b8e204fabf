"""Shared matrix of the reference perf suite: the seeds' findings as tests, for each reference workload.

The reference suite runs with ``nox -s perf`` (smoke scale, CPU, a few minutes on two cores) or
``nox -s perf -- --perfsuite-scale full`` on a GPU. Thresholds here are the
ones that hold honestly on every machine: deterministic counts (host syncs,
AMP engaged, graph breaks) everywhere, GPU-only bounds (gpu_util) that skip
with the reason on a CPU, and within-session ratios only where the device
makes them meaningful. Timings are judged against stored baselines with
``--perfsuite-compare``, never against fixed numbers.
"""

from __future__ import annotations

from perfsuite.core.knobs import PINNED_COPIES

WORKLOADS = ("face_parsing", "captcha_slider", "super_resolution", "gray_classifier")
SMALLEST = "gray_classifier"  # the compile case: torch.compile on two CPU cores takes about a minute


def workers(scale: str) -> int:
    """The tuned worker count: two on the smoke machine's two cores, eight at full scale (seed 002's fix)."""
    return 2 if scale == "smoke" else 8


# Tests whose subject is not the copy make the seeds' pinned copy (perfsuite.core.knobs.PINNED_COPIES), so that
# their max_syncs_per_step=0 holds on CUDA as it does on a CPU run.
PINNED = PINNED_COPIES
