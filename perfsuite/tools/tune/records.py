"""What tune keeps of each run and each comparison: plain data, JSON-ready, nothing that runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.judge.adaptive import ABOutcome, Decision

# The loader knobs tune searches, in the order it searches them; batch_size only with --batch.
SEARCHED = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers", "batch_size")
# The loader ledger's metrics (issue 20), read by name when a Result has them.
LEDGER = ("loader_headroom", "loader_capacity_samples_per_s", "loader_cpu_ms_per_sample")


def setting_of(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The searched knobs of a knob dict, in search order."""
    return {k: knobs.get(k) for k in SEARCHED}


def label(knobs: Mapping[str, Any], only: Sequence[str] | None = None) -> str:
    """``num_workers=2, prefetch_factor=default`` (None is torch's default)."""
    names = only if only is not None else SEARCHED
    return ", ".join(f"{k}={'default' if knobs.get(k) is None else knobs.get(k)}" for k in names if k in knobs)


@dataclass
class RunRecord:
    """One fresh run of one setting: the figures tune judges by, or why it has none."""

    knobs: dict[str, Any]
    samples_per_s: float | None = None
    data_wait_frac: float | None = None
    peak_rss_mb: float | None = None
    workers_mb: float | None = None
    worker_processes: int = 0
    batch_bytes: float | None = None  # bytes of one collated batch, where measured
    ledger: dict[str, float] = field(default_factory=dict)
    demand_samples_per_s: float | None = None  # the step fed a device-resident batch (the reference run only)
    error: str | None = None
    oom: bool = False
    seconds: float = 0.0
    contended: str | None = None  # why the machine was too busy for its wall-clock figures (judge.contention)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples_per_s) and self.samples_per_s > 0  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        return {
            "samples_per_s": self.samples_per_s,
            "data_wait_frac": self.data_wait_frac,
            "peak_rss_mb": self.peak_rss_mb,
            **({"ledger": self.ledger} if self.ledger else {}),
            **({"error": self.error, "oom": self.oom} if self.error else {}),
            **({"contended": self.contended} if self.contended else {}),
            "seconds": round(self.seconds, 2),
        }


@dataclass
class Trial:
    """One step of a climb: the accepted setting (A) against a candidate (B), interleaved ABBA/BAAB."""

    knob: str
    base: dict[str, Any]
    head: dict[str, Any]
    base_runs: list[RunRecord] = field(default_factory=list)
    head_runs: list[RunRecord] = field(default_factory=list)
    decision: Decision | None = None
    outcome: str = "running"  # gain | same | worse | undecided | out of memory | failed | interrupted
    note: str = ""
    contended: int = 0  # runs whose pairs were dropped: the machine was too busy (judge.contention)

    @property
    def effect_without_gain(self) -> bool:
        """A step not called a gain whose samples/s interval still excludes 1: measured, not decided."""
        speed = self.speedup()
        return not self.gain and speed is not None and (speed[1] > 1.0 or speed[2] < 1.0)

    @property
    def gain(self) -> bool:
        return self.outcome == "gain"

    @property
    def decided(self) -> bool:
        """Whether counted pairs (or a failed run) decided this step; undecided and interrupted steps measured
        nothing tune may act on."""
        return self.outcome in ("gain", "same", "worse", "out of memory", "failed")

    def arms_apart(self) -> bool:
        """Whether the two settings' samples/s intervals, over every run of each (contended ones too), do not
        overlap: a difference the report must not call "no gain", decided or not."""
        base, head = summarize(self.base_runs), summarize(self.head_runs)
        if None in (base.low, base.high, head.low, head.high):
            return False
        return base.high < head.low or head.high < base.low  # type: ignore[operator]

    def speedup(self) -> tuple[float, float, float] | None:
        """Candidate samples/s over the accepted setting's: (estimate, low, high) of the decision's interval."""
        d = self.decision
        if d is None or d.ratio is None or d.low is None or d.high is None:
            return None
        return 1.0 / d.ratio, 1.0 / d.high, 1.0 / d.low

    def to_dict(self) -> dict[str, Any]:
        d = self.decision
        speed = self.speedup()
        return {
            "knob": self.knob,
            "from": self.base.get(self.knob),
            "to": self.head.get(self.knob),
            "outcome": self.outcome,
            "note": self.note,
            "speedup": None if speed is None else {"estimate": speed[0], "low": speed[1], "high": speed[2]},
            "decision": d.to_dict() if d else None,
            "base": {"knobs": self.base, "summary": summarize(self.base_runs).to_dict()},
            "head": {"knobs": self.head, "summary": summarize(self.head_runs).to_dict()},
            "runs": {
                "base": [r.to_dict() for r in self.base_runs],
                "head": [r.to_dict() for r in self.head_runs],
            },
        }


OUTCOMES = {
    ABOutcome.IMPROVED: "gain",
    ABOutcome.SAME: "same",
    ABOutcome.REGRESSED: "worse",
    ABOutcome.UNKNOWN: "undecided",
}


@dataclass(frozen=True)
class Summary:
    """One setting's samples/s over its runs: median, and the mean's interval (on logs, a t-interval)."""

    runs: int
    median: float | None
    low: float | None
    high: float | None
    confidence: float
    data_wait_median: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "samples_per_s_median": self.median,
            "samples_per_s_mean_ci": None if self.low is None else [self.low, self.high],
            "confidence": self.confidence,
            "data_wait_frac_median": self.data_wait_median,
        }

    def text(self) -> str:
        if self.median is None:
            return "no successful run"
        from perfsuite.core.units import sig

        ci = f" [{sig(self.low)}..{sig(self.high)}]" if self.low is not None and self.high is not None else ""
        return f"{sig(self.median)} samples/s{ci} ({self.runs} runs)"


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def summarize(runs: Sequence[RunRecord], confidence: float = 0.90) -> Summary:
    """Median samples/s of the successful runs and the ``confidence`` interval of their (geometric) mean."""
    xs = [r.samples_per_s for r in runs if r.ok and r.samples_per_s]
    waits = [r.data_wait_frac for r in runs if r.ok and r.data_wait_frac is not None]
    low = high = None
    if len(xs) >= 2:
        from scipy.stats import t

        logs = [math.log(x) for x in xs]
        n = len(logs)
        mean = sum(logs) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1))
        half = float(t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
        low, high = math.exp(mean - half), math.exp(mean + half)
    return Summary(len(xs), _median(xs), low, high, confidence, _median(waits))
