"""After the window: which steps are scanned for periodic work, which are observed by every probe, which only run.

A training loop often does some work every N steps: reads predictions back
every 10 steps, evaluates every epoch. Observing 1 or 4 steps right after
the window sees such work or misses it depending on where those steps fall,
so a count would move with ``--steps``. Unless the caller fixed
``observe_steps`` and nothing else, the steps after the window go:

1. **scan** (``period_steps`` steps): only the probes that declare ``scans``
   (the sync probe: a function mode, cheap) watch each step, and report the
   work that recurs as (period, offset) (:meth:`perfsuite.probes.Probe.periodic`).
   Twenty steps see anything done every 10 steps at least twice, wherever it
   falls, so its rate is exact.
2. **observe** (``observe_steps`` steps): every probe instruments the step, as
   before; steps the scan predicts to carry periodic work are **skipped** (run,
   not observed), so ops, bytes, FLOPs and dtypes describe the steady step and
   stay the same whatever ``--steps`` is. At most one period's worth of steps
   is skipped in a row; the periodic work itself is reported by the sync probe.

The same plan drives the runner's loop and a script's (perfsuite exec).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PERIOD_STEPS = 20  # a user's job or script: sees work done every <= 10 steps twice

SCAN, SKIP, OBSERVE = "scan", "skip", "observe"


def period_steps_for(requested: int | None, job: Any) -> int:
    """The scan length: as requested; else for a reference workload two periods of its log/eval
    interval (none without them), for a user's job or script :data:`DEFAULT_PERIOD_STEPS`."""
    if requested is not None:
        return requested
    knobs = getattr(job, "knobs", None)
    if getattr(job, "reference", False) and isinstance(knobs, dict):
        intervals = [int(knobs.get(k) or 0) for k in ("log_interval", "eval_interval")]
        periods = [i for i in intervals if i > 1]
        return 2 * math.lcm(*periods) if periods else 0
    return DEFAULT_PERIOD_STEPS


@dataclass
class ObservationPlan:
    """Hands out the kind of each step after the window (``next_kind``) until ``done``."""

    observe_steps: int
    period_steps: int = 0
    probes: Sequence[Any] = ()
    scanned: int = 0
    observed: int = 0
    skipped: int = 0
    _periods: list[tuple[int, int]] = field(default_factory=list)
    _skip_run: int = 0

    @property
    def done(self) -> bool:
        return self.scanned >= self.period_steps and self.observed >= self.observe_steps

    @property
    def index(self) -> int:
        """The index of the next step counted from the first scanned one."""
        return self.scanned + self.observed + self.skipped

    def _learn(self) -> None:
        """After the scan: the periodic work the scanning probes saw."""
        scanners = [probe for probe in self.probes if getattr(probe, "scans", False)]
        self._periods = sorted({p for probe in scanners for p in probe.periodic()})

    @property
    def periods(self) -> tuple[int, ...]:
        """The periods of the work the scan saw every N steps (input efficiency keeps those steps out)."""
        return tuple(sorted({p for p, _ in self._periods}))

    def _busy(self, index: int) -> bool:
        return any(index % period == offset for period, offset in self._periods)

    def next_kind(self) -> str | None:
        """``scan``, ``observe`` or ``skip`` for the next step; None when the plan is done."""
        if self.scanned < self.period_steps:
            return SCAN
        if self.observed >= self.observe_steps:
            return None
        longest = max((p for p, _ in self._periods), default=1)
        if self._busy(self.index) and self._skip_run < longest - 1:
            return SKIP
        return OBSERVE

    def record(self, kind: str) -> None:
        """The step of that kind has run."""
        if kind == SCAN:
            self.scanned += 1
            if self.scanned == self.period_steps:
                self._learn()
        elif kind == SKIP:
            self.skipped += 1
            self._skip_run += 1
            return
        else:
            self.observed += 1
        self._skip_run = 0

    def watchers(self, kind: str) -> list[Any]:
        """The contexts around a step of this kind: every probe's observe(), the scanners' scan(), or none."""
        if kind == OBSERVE:
            return [probe.observe() for probe in self.probes]
        if kind == SCAN:
            return [probe.scan() for probe in self.probes if getattr(probe, "scans", False)]
        return []

    @property
    def most_steps(self) -> int:
        """The most steps this plan can run (for deadlines): the scan, and observed steps each after a run of skips
        (a period seen twice in the scan is at most half of it long)."""
        return self.period_steps + self.observe_steps * max(1, self.period_steps // 2)

    def describe(self) -> dict[str, Any]:
        """For Result notes and details: how the steps after the window were used."""
        return {
            "scanned": self.scanned,
            "observed": self.observed,
            "skipped": self.skipped,
            "periods": [list(p) for p in self._periods],
        }
