"""A verdict and its outcome: what every rule in :mod:`perfsuite.judge` returns.

An unavailable metric is never a pass: it is ``unavailable``, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from perfsuite.core import metrics as registry

DEFAULT_FACTOR = 1.05
DEFAULT_ALPHA = 0.01
MIN_SAMPLES = 5


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    UNAVAILABLE = "unavailable"
    NEW = "new"
    CHANGED = "changed"  # an exact value moved where no direction is better, or the committed file is stale

    def __str__(self) -> str:
        return self.value


FAILING = frozenset({Outcome.FAIL, Outcome.REGRESSED, Outcome.CHANGED})
# Shared reasons a figure was not judged (Verdict.unjudged), each counted on one line by the reports.
NO_BASELINE = "first run on this machine: no timing baseline yet (`nox -s baseline` or --perfsuite-save records one)"
NO_BASE_VALUE = (
    "the baseline run holds no value for them (it did not measure them: an older perfsuite, or a busy machine "
    "that slowed a phase; each one's reason is in -v and the JSON); --perfsuite-save records them"
)


@dataclass(frozen=True)
class Verdict:
    """One metric's judgement. For a threshold verdict, ``base`` holds the bound.

    ``ratio`` is head / base (for step_ms: of the medians); ``cause`` is the
    likely reason in the workload's terms, filled in by the plugin. ``unjudged`` is the reason a figure was
    not judged when many share it (a busy machine, no baseline value yet): reports count such verdicts on one
    line per reason instead of a paragraph each, and list them with ``--verbose`` and in the JSON.
    """

    test_id: str
    metric: str
    base: float | int | bool | str | None
    head: float | int | bool | str | None
    ratio: float | None
    outcome: Outcome
    message: str
    cause: str | None = None
    unjudged: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in FAILING

    def with_cause(self, cause: str | None) -> Verdict:
        return replace(self, cause=cause)

    def to_dict(self) -> dict[str, Any]:
        return {
            "test_id": self.test_id,
            "metric": self.metric,
            "base": self.base,
            "head": self.head,
            "ratio": self.ratio,
            "outcome": self.outcome.value,
            "message": self.message,
            "cause": self.cause,
            **({"unjudged": self.unjudged} if self.unjudged else {}),  # absent when judged: older reports read alike
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            test_id=data["test_id"],
            metric=data["metric"],
            base=data["base"],
            head=data["head"],
            ratio=data["ratio"],
            outcome=Outcome(data["outcome"]),
            message=data["message"],
            cause=data.get("cause"),
            unjudged=data.get("unjudged"),
        )


def format_value(value: Any) -> str:
    """Short, readable numbers for messages: 0.62, 12.35, 3200, 0.0000131 (never an exponent; units in
    :mod:`perfsuite.core.units`, which tables use)."""
    from perfsuite.core.units import sig

    if value is None:
        return "-"
    if isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1e4 else sig(value, 4)
    return str(value)


def direction(spec: registry.MetricSpec, b: Any, h: Any) -> Outcome:
    """Exact comparison: unchanged, or regressed/improved by the spec's better direction (changed for labels)."""
    if spec.kind == "label":
        return Outcome.UNCHANGED if b == h else Outcome.CHANGED
    bv, hv = float(b), float(h)
    if abs(hv - bv) <= spec.tolerance * max(1.0, abs(bv)):
        return Outcome.UNCHANGED
    worse = hv > bv if spec.better == "lower" else hv < bv
    return Outcome.REGRESSED if worse else Outcome.IMPROVED


def value_ratio(base: Any, head: Any) -> float | None:
    try:
        return float(head) / float(base) if float(base) != 0 else None
    except (TypeError, ValueError):
        return None
