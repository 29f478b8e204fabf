"""``--budget MINUTES``: the rounds and counterfactuals that fit, what was left out, and the time left.

The first unchanged run says what a run costs here (start-up included: a script's runs are fresh
processes); :mod:`.plan` spends what is left on the counterfactuals that can change the answer and notes
the others here, with why; after the first round, a further round runs only while the time left holds one
more round as long as the first. The unchanged runs of one diagnosis keep one window length, so they pool:
the budget picks how many, not how long (a fix whose runs the plan lengthens is paired with unchanged runs
of its own length).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Budget:
    """A diagnosis's time limit (``seconds`` None: no limit) and what it left out."""

    seconds: float | None
    start: float = field(default_factory=time.monotonic)
    left_out: list[str] = field(default_factory=list)
    more: list[str] = field(default_factory=list)  # rounds past --rounds, and why (perfsuite.tools.doctor.decide)

    @classmethod
    def minutes(cls, minutes: float | None) -> Budget:
        return cls(None if minutes is None else minutes * 60.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float | None:
        return None if self.seconds is None else max(0.0, self.seconds - self.elapsed())

    def say(self) -> str:
        """`` (3m10s of the budget left)``, or nothing without a budget."""
        left = self.left()
        if left is None or self.seconds is None:
            return f" ({self.elapsed():.0f}s so far)"
        return f" ({int(left // 60)}m{int(left % 60):02d}s of the {self.seconds / 60:g}-minute budget left)"

    def another_round(self, round_s: float, done: int, asked: int) -> bool:
        """Whether round ``done + 1`` of ``asked`` fits (a round as long as the first); notes the rounds left out."""
        left = self.left()
        if left is None or left >= round_s:
            return True
        self.left_out.append(
            f"rounds {done + 1}..{asked} of {asked}: a round takes {round_s:.0f}s and {left:.0f}s of the budget was "
            "left" + ("; one round gives each counterfactual a ratio without an interval" if done == 1 else "")
        )
        return False

    def holds(self, round_s: float) -> bool:
        """Whether one more round of ``round_s`` fits (always, without a limit)."""
        left = self.left()
        return left is None or left >= round_s

    def summary(self) -> list[str]:
        """What the report says of the budget: its use, and what it left out."""
        more = list(self.more)
        if self.seconds is None:
            return more
        used = self.elapsed()
        within = "within" if used <= self.seconds else "over"
        head = f"--budget {self.seconds / 60:g} min: took {used / 60:.1f} min ({within} it)"
        if not self.left_out:
            return [head + "; nothing left out", *more]
        return [head, *more, *(f"left out: {x}" for x in self.left_out)]
