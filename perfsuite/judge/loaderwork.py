"""What moved in a loader-work counter: the callables (or stages) whose counts per sample changed most.

A count by ``stage: callable`` changes in many small ways when one thing changes (a 4x decode reads more
chunks, touches ``Image.size`` more often); what says *what changed* is the callable that appeared, vanished
or moved by the largest factor (``PIL.Image.Image.resize 0 -> 1``). So movers are ranked by how far their
ratio moved (a new or vanished one first), then by how much, where :func:`perfsuite.judge.causes.movers`
ranks step counters by how much alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

TOP = 4


def _rank(before: float, after: float) -> tuple[float, float]:
    if before <= 0 or after <= 0:
        return (math.inf, abs(after - before))
    return (abs(math.log(after / before)), abs(after - before))


def moved(base_by: Mapping[str, Any] | None, head_by: Mapping[str, Any] | None, unit: str, top: int = TOP) -> str:
    """``__getitem__: PIL.Image.Image.resize 0 -> 1 calls/sample, ...``: the top movers, most changed first."""
    from perfsuite.judge.verdict import format_value

    if not isinstance(base_by, Mapping) or not isinstance(head_by, Mapping):
        return ""
    keys = set(base_by) | set(head_by)
    changes = [(float(base_by.get(k, 0) or 0), float(head_by.get(k, 0) or 0), k) for k in keys]
    changes = [c for c in changes if c[0] != c[1]]
    changes.sort(key=lambda c: (*(-r for r in _rank(c[0], c[1])), c[2]))
    per = unit.split("/", 1)[0] if "/" in unit else unit
    parts = []
    for before, after, key in changes[:top]:
        ratio = f" (x{after / before:.3g})" if before > 0 and after > 0 else ""
        parts.append(f"{key} {format_value(before)} -> {format_value(after)} {per}/sample{ratio}")
    return ", ".join(parts)
