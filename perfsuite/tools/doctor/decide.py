"""Rounds past ``--rounds`` while they can change the answer: which fix helps most, and whether it helps at all.

Three interleaved pairs often leave a fix's interval across 1, or two fixes' intervals overlapping (on this
project's 2-core VM: fewer threads x1.33 [0.84..2.09] beside fewer workers x0.92 [0.78..1.07], with four of the
five budgeted minutes unspent). The answer is the fix measured best, and whether its gain is real; a further
pair of a fix can change that only when

* it is the best so far and its interval holds 1 (a gain not yet shown, nor ruled out), or
* its interval reaches above both the best's low end and 1 (it may yet be the better fix, and a gain; then
  the best runs on too).

Where even the best's interval lies below 1, no fix helps, and which hurts least is no answer: nothing runs on.

A fix that can no longer change the answer runs no more: its rounds stay a prefix of the unchanged runs'
rounds, which is how :func:`perfsuite.tools.doctor.diagnosis.measure` pairs them. Further rounds stop at
``--max-rounds`` or when the budget holds no more.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from perfsuite.tools.doctor.budget import Budget
from perfsuite.tools.doctor.model import Measured, Unavailable

MAX_ROUNDS = 8  # --max-rounds' default: the t-interval of 8 pairs is about half as wide as that of 3

K = TypeVar("K", bound=Hashable)


def still_open(measured: Mapping[K, Measured | Unavailable]) -> list[K]:
    """The fixes (keys, in their order) whose further pairs can change the answer; [] when it is decided."""
    ranged = {k: m for k, m in measured.items() if isinstance(m, Measured) and m.low is not None and m.high is not None}
    if not ranged:
        return []  # one pair each (no interval), or nothing measured: more rounds have nothing to narrow
    best = max(ranged, key=lambda k: ranged[k].ratio)
    low, high = ranged[best].low or 0.0, ranged[best].high or 0.0
    if high <= 1.0:
        return []  # no fix helps, whichever hurts least
    rivals = [k for k, m in ranged.items() if k != best and (m.high or 0.0) > max(low, 1.0)]
    if not rivals and low > 1.0:
        return []
    keep = {best, *rivals}
    return [k for k in measured if k in keep]


@dataclass
class Further:
    """The rounds run past ``--rounds``: each round's fixes, and why they stopped."""

    asked: int
    limit: int
    rounds: list[list[str]] = field(default_factory=list)
    stopped: str = ""

    def go_on(self, labels: list[str], budget: Budget, round_s: float) -> bool:
        """Whether a further round runs for the fixes still open (``labels``), estimated at ``round_s``; it is
        noted, or why not."""
        if not labels:
            self.stopped = "the answer was decided"
        elif not budget.holds(round_s):
            self.stopped = "the budget held no further round"
        else:
            self.rounds.append(labels)
            return True
        return False

    def note(self) -> str:
        """What the report says of them ("" when none ran): which fixes, how many rounds, why they stopped."""
        if not self.rounds:
            return ""
        first, last = self.asked + 1, self.asked + len(self.rounds)
        counts: dict[str, int] = {}
        for labels in self.rounds:
            for label in labels:
                counts[label] = counts.get(label, 0) + 1
        whose = "; ".join(f"{label}: {n} round{'s' if n != 1 else ''}" for label, n in counts.items())
        span = f"round {first}" if first == last else f"rounds {first}..{last}"
        return (
            f"{span} (up to {self.limit}, --max-rounds) ran again the fixes whose intervals after {self.asked} "
            f"could not yet say which helps most, or whether it helps: {whose}; stopped: "
            + (self.stopped or f"--max-rounds {self.limit}")
        )
