"""A bound on how long a failing property search may shrink, so that a red CI job is red in seconds.

Hypothesis shrinks a failure until no smaller input fails. On a slow callable (a sub-pixel resize check,
a Kornia pipeline) that took 146-304 s and ended with Hypothesis's "shrinking was very slow" health
warning, while the failure itself was found in a few seconds. Hypothesis has no setting that caps the
shrinker's calls, so :class:`ShrinkBudget` caps them from inside the test function: after the first
failure it lets ``calls`` more inputs run; past that, an input not already seen to fail returns at once
(it counts as passing, so the shrinker finds no further improvement and stops), while an input seen to
fail runs again and fails again. Hypothesis's final replay of the smallest failure therefore still fails,
and what is printed is the smallest failure found within the budget.

The budget of calls applies to a derandomized search (the ``ci`` profile: one fixed run whose failure must be
reported fast); ``dev`` and ``nightly`` shrink until no smaller input fails, but in any profile the shrink
stops :data:`SHRINK_S` seconds after the first failure (a slow callable under ``dev`` once took 64-108 s to
report a failure found in 0.35 s), so a failing check reports within 30 s of finding it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CI_SHRINK_CALLS = 100  # enough to reach B <= 2 and sides <= 40 on the negative controls (tests/property)
SHRINK_S: float | None = 20.0  # the most seconds any search shrinks after its first failure: reported within 30 s of it


def shrink_calls_for(settings: Any, requested: int | None) -> int | None:
    """The budget for a search under ``settings``: ``requested`` if given (None keeps Hypothesis's own
    unbounded shrink: pass ``shrink_calls=0`` for no shrinking at all), else :data:`CI_SHRINK_CALLS` for
    a derandomized search, else unbounded."""
    if requested is not None:
        if not isinstance(requested, int) or isinstance(requested, bool) or requested < 0:
            from perfsuite.errors import PropertyArgumentError

            raise PropertyArgumentError(
                f"shrink_calls={requested!r}: pass a whole number of calls >= 0, or None for the profile's default"
            )
        return requested
    return CI_SHRINK_CALLS if getattr(settings, "derandomize", False) else None


def fingerprint(*parts: Any) -> str:
    """A key for one drawn input: array bytes, shapes and dtypes, and the other arguments' reprs."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        _feed(digest, part)
    return digest.hexdigest()


def _feed(digest: Any, part: Any) -> None:
    if isinstance(part, np.ndarray):
        digest.update(f"{part.dtype}{part.shape}".encode())
        digest.update(np.ascontiguousarray(part).tobytes())
    elif isinstance(part, list | tuple):
        digest.update(f"{type(part).__name__}{len(part)}".encode())
        for item in part:
            _feed(digest, item)
    else:
        digest.update(repr(part).encode())


@dataclass
class ShrinkBudget:
    """Counts the calls of a property test and stops the shrinker's work after ``limit`` calls (None: no bound),
    or ``seconds`` after the first failure (None: no bound), whichever comes first."""

    limit: int | None
    seconds: float | None = field(default_factory=lambda: SHRINK_S)
    clock: Callable[[], float] = time.monotonic
    first_failure_at: float | None = None
    calls: int = 0  # every call, the generation phase's included
    calls_after_failure: int = 0  # the shrink steps that ran the callable
    skipped: int = 0  # shrink candidates answered without running, once the budget was spent
    failed: set[str] = field(default_factory=set)

    def run(self, key: str, body: Callable[[], None]) -> None:
        """Run ``body`` for the input ``key`` unless the budget is spent and ``key`` has not failed before."""
        self.calls += 1
        if self.failed:
            if not self.exhausted:
                self.calls_after_failure += 1
            elif key not in self.failed:
                self.skipped += 1
                return
            # else: a known failure replayed (Hypothesis's final run): it runs, and fails again
        try:
            body()
        except BaseException:
            if self.first_failure_at is None:
                self.first_failure_at = self.clock()
            self.failed.add(key)
            raise

    @property
    def out_of_time(self) -> bool:
        """The shrink has run ``seconds`` since the first failure."""
        started = self.first_failure_at
        return self.seconds is not None and started is not None and self.clock() - started >= self.seconds

    @property
    def exhausted(self) -> bool:
        spent = self.limit is not None and bool(self.failed) and self.calls_after_failure >= self.limit
        return spent or self.out_of_time

    def describe(self) -> str:
        """One clause for the failure's message: how far the shrink went."""
        if self.out_of_time and (self.limit is None or self.calls_after_failure < self.limit):
            return (
                f"shrunk for {self.seconds:g} s after the first failure ({self.calls_after_failure} shrink calls; "
                "the smallest found in that time, so that a failure is reported within 30 s)"
            )
        if self.limit is None:
            return f"shrunk fully ({self.calls_after_failure} shrink calls)"
        state = "budget spent" if self.exhausted else "smallest found"
        return (
            f"shrunk for {self.calls_after_failure} of at most {self.limit} calls ({state}; "
            "pass shrink_calls=None, or use the dev profile, to shrink fully)"
        )
