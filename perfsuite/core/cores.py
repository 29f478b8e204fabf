"""How many CPU cores this process may use: its affinity mask and its cgroup's CPU quota, not ``os.cpu_count()``.

A CI container on a 64-core host often may use 2 of them. Worker counts, torch's intra-op threads
and ranks per node must fit what the process may use, or the loader, the step and the ranks take
turns on the same cores and every timing mixes waiting with contention.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Cores:
    """The cores a process may use, and what limits them (for messages)."""

    usable: int
    affinity: int
    quota: float | None  # CPUs' worth of time per period the cgroup allows; None: no quota
    source: str  # "affinity", "cgroup quota" or "os.cpu_count"

    def describe(self) -> str:
        quota = f", cgroup quota {self.quota:g} CPUs" if self.quota is not None else ""
        return f"{self.usable} usable core(s) ({self.affinity} in the affinity mask{quota})"


def _affinity() -> tuple[int, str]:
    try:
        return len(os.sched_getaffinity(0)), "affinity"
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1, "os.cpu_count"


def cgroup_quota(root: Path = CGROUP_ROOT) -> float | None:
    """CPUs' worth of quota from cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``; None when unlimited or unknown."""
    try:
        v2 = root / "cpu.max"
        if v2.is_file():
            quota, _, period = v2.read_text().strip().partition(" ")
            return None if quota == "max" else int(quota) / int(period or "100000")
        v1 = root / "cpu" / "cpu.cfs_quota_us"
        if v1.is_file():
            quota_us = int(v1.read_text().strip())
            period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text().strip())
            return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None
    return None


def usable_cores(root: Path = CGROUP_ROOT) -> Cores:
    """The cores this process may use: the affinity mask, lowered to the cgroup quota (rounded up, at least 1)."""
    affinity, source = _affinity()
    quota = cgroup_quota(root)
    usable = affinity
    if quota is not None and math.ceil(quota) < affinity:
        usable, source = max(1, math.ceil(quota)), "cgroup quota"
    return Cores(usable=usable, affinity=affinity, quota=quota, source=source)
