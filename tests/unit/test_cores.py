"""The cores a process may use: the affinity mask, lowered to a cgroup's CPU quota (v1 and v2 layouts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfsuite.core.cores import cgroup_quota, usable_cores


def _v2(root: Path, text: str) -> Path:
    (root / "cpu.max").write_text(text)
    return root


def _v1(root: Path, quota: int, period: int = 100000) -> Path:
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (lambda r: _v2(r, "max 100000\n"), None),
        (lambda r: _v2(r, "150000 100000\n"), 1.5),
        (lambda r: _v1(r, -1), None),
        (lambda r: _v1(r, 50000), 0.5),
        (lambda r: r, None),  # no cgroup files at all
    ],
    ids=["v2-unlimited", "v2-1.5-cpus", "v1-unlimited", "v1-half-cpu", "none"],
)
def test_cgroup_quota_reads_both_layouts(tmp_path, layout, expected):
    assert cgroup_quota(layout(tmp_path)) == expected


def test_a_quota_below_the_affinity_mask_limits_the_usable_cores(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    cores = usable_cores(_v2(tmp_path, "50000 100000\n"))
    assert (cores.usable, cores.affinity, cores.quota) == (1, affinity, 0.5)
    assert cores.source == ("cgroup quota" if affinity > 1 else "affinity")


def test_without_a_quota_the_affinity_mask_decides(tmp_path):
    cores = usable_cores(tmp_path)
    assert cores.usable == len(os.sched_getaffinity(0)) and cores.quota is None
    assert "usable core" in cores.describe()
