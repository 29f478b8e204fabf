"""The contention study's pricing of kept data (scripts/contention_study.py): one run's spread between identical
runs, and the rule for several base runs priced on kept runs. Both read only the kept samples, so they are exact."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "contention_study.py"


@pytest.fixture(scope="module")
def study() -> Any:
    spec = importlib.util.spec_from_file_location("contention_study", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(level: float, jitter: float = 0.0) -> dict[str, Any]:
    """A kept run of 12 steps: an epoch start every third step, the rest at ``level`` ms."""
    steps = [level * (5.0 if i % 3 == 1 else 1.0) * (1.0 + jitter * ((i % 4) - 1.5) / 10) for i in range(12)]
    return {"step_ms": steps, "step_cpu_ms": [s * 0.9 for s in steps]}


def pair(base: dict[str, Any], head: dict[str, Any], loads: tuple[float, float] = (0.0, 0.0)) -> dict[str, Any]:
    return {"loads": list(loads), "samples": [base, head]}


def test_spread_is_the_sd_of_one_runs_log_median(study: Any) -> None:
    d = 0.1  # half the pairs' heads land x e^0.1 above their base, half as far below: pstdev of the log ratios is d
    cell = [pair(run(10.0), run(10.0 * math.exp(d if i % 2 else -d))) for i in range(30)]
    cell.append(pair(run(10.0), run(30.0), loads=(0.0, 0.5)))  # beyond the wall-clock bound: left out
    (line,) = study.spread({"cells": {"faces|0|aa": cell}})
    expected = f"x{math.exp(d / math.sqrt(2)):.3f}"
    assert f"`step_ms` {expected}" in line
    assert f"`step_cpu_ms` {expected}" in line


def test_spread_needs_twenty_pairs(study: Any) -> None:
    cell = [pair(run(10.0), run(11.0)) for _ in range(19)]
    assert study.spread({"cells": {"faces|0|aa": cell}}) == []


def test_between_runs_priced_on_kept_runs(study: Any) -> None:
    levels = [10.0, 10.3, 9.8, 10.1, 9.9, 10.2]  # base runs a few percent apart, as identical runs land
    aa = [pair(run(levels[i % 6], 1.0), run(levels[(i + 3) % 6], 1.0)) for i in range(24)]
    slow = [pair(run(10.0, 1.0), run(13.0, 1.0)) for _ in range(6)]  # the slowed run is the second
    same = [pair(run(10.0, 1.0), run(10.0, 1.0)) for _ in range(6)]
    data = {"cells": {"job|0|aa": aa, "job|0|slow30": slow, "job|0|slow10": same}}
    lines = study.between(data, ks=(3,))
    assert lines == [
        "`step_ms` against 3 base runs (x1.05 and their measured spread), `job`, quiet: "
        "A/A 0/12 groups, detected slow10 0/6, slow30 6/6"
    ]


@pytest.mark.slow
def test_shipped_default_priced_per_cell(study: Any) -> None:
    """The shipped rule's table: k = 3 base runs, and one base run decided only beyond its own spread (x1.3 here:
    the runs' steps barely scatter around their epoch starts)."""
    levels = [10.0, 10.3, 9.8, 10.1, 9.9, 10.2]
    aa = [pair(run(levels[i % 6], 1.0), run(levels[(i + 3) % 6], 1.0)) for i in range(24)]
    far = [pair(run(10.0, 1.0), run(15.0, 1.0)) for _ in range(5)]  # x1.5: beyond x1.3, one base run decides
    far.append(pair(run(10.0, 1.0), run(15.0, 1.0), loads=(0.0, 0.5)))  # a busy head: not judged under the guard
    near = [pair(run(10.0, 1.0), run(12.5, 1.0)) for _ in range(6)]  # x1.25: within x1.3, one base run does not
    data = {"cells": {"job|0|aa": aa, "job|0|slow30": far, "job|0|slow10": near}}
    table = study.shipped(data)
    (row,) = [line for line in table.splitlines() if line.startswith("| job | 0 |")]
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    assert cells == [
        "0/12 (0.0%); guarded 0/12 (0.0%)",  # A/A, 3 base runs: 48 kept runs in groups of 4
        "6/6 (100.0%); guarded 6/6 (100.0%)",  # x1.25 against 3 base runs a few percent apart
        "6/6 (100.0%); guarded 5/5 (100.0%)",
        "0/24 (0.0%); guarded 0/24 (0.0%)",  # A/A, 1 base run
        "0/6 (0.0%); guarded 0/6 (0.0%)",  # x1.25 from one base run: inconclusive, not detected
        "6/6 (100.0%); guarded 5/5 (100.0%)",
    ]
