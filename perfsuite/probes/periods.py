"""Work done every N steps, from per-step counts: its period, and a per-step rate that does not depend on alignment.

A training loop that reads predictions back every 10 steps does it once in
any 10 consecutive steps. Averaging over whatever steps happen to be observed
gives 0 or 1/4 for 4 steps, depending on where they fall, so the count a run
reports would move with ``--steps``. Here a site's per-step counts are split
into a part present on every watched step (its minimum) and the rest; the rest
is *periodic* when it recurs at one fixed gap, with the same count each time,
and covers the watched steps exactly (nothing missing at either end). Its rate
is then count / period, exactly, whichever steps were watched::

    rate([0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]).per_step == 0.1   # every 10 steps

Work seen only once is reported with how many steps were watched; work at
irregular gaps with its average over them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    """How often one kind of work happened across ``watched`` consecutive steps."""

    per_step: float
    every: int | None  # 1: every step; N: every N steps; None: not seen, or not regular
    offset: int | None  # the first watched step (0-based) that carries the periodic part
    base: int  # the count present on every step
    extra: int  # the periodic part's count each time it recurs
    seen: int  # steps that carried more than the base
    watched: int

    @property
    def periodic(self) -> bool:
        """Whether some of the work recurs every N > 1 steps."""
        return self.every is not None and self.every > 1

    def describe(self) -> str:
        """``every step`` / ``every 10 steps`` / ``once in 20 watched steps`` / ``3 times in 20 steps, irregularly``."""
        if self.every == 1:
            return "every step"
        if self.every is not None:
            return f"every {self.every} steps" if self.base == 0 else f"every step, more every {self.every} steps"
        if self.seen == 1:
            return f"once in {self.watched} watched steps (a longer period than the watch, or a one-off)"
        return f"{self.seen} times in {self.watched} watched steps, at irregular gaps"


def rate(counts: Sequence[int]) -> Rate:
    """The rate of one kind of work from its count on each of consecutive watched steps."""
    n = len(counts)
    if n == 0:
        return Rate(0.0, None, None, 0, 0, 0, 0)
    base = min(counts)
    rest = [c - base for c in counts]
    hits = [i for i, r in enumerate(rest) if r > 0]
    if not hits:
        return Rate(float(base), 1 if base else None, 0 if base else None, base, 0, 0, n)
    if len(hits) >= 2:
        gaps = {b - a for a, b in zip(hits, hits[1:])}
        extras = {rest[i] for i in hits}
        period = hits[1] - hits[0]
        # One gap, one count, and no occurrence missing before the first or after the last watched step.
        if len(gaps) == 1 and len(extras) == 1 and hits[0] < period and hits[-1] + period >= n:
            extra = extras.pop()
            return Rate(base + extra / period, period, hits[0], base, extra, len(hits), n)
    return Rate(base + sum(rest) / n, None, None, base, max(rest), len(hits), n)


LONG_STEP = 2.0  # a step whose own work exceeds this multiple of the median step's carries extra work
LONG_STEP_MIN_MS = 1.0  # ... and by at least this much (a 0.2 ms step twice as long is noise, not an evaluation)


def long_steps(work_ms: Sequence[float], factor: float = LONG_STEP) -> list[int]:
    """Indices of the steps whose own work (wall time less the wait for the batch) stands out from the median's."""
    if not work_ms:
        return []
    ordered = sorted(work_ms)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return [i for i, ms in enumerate(work_ms) if ms > factor * median and ms - median >= LONG_STEP_MIN_MS]


def periodic_steps(work_ms: Sequence[float], factor: float = LONG_STEP) -> tuple[Rate, list[int]]:
    """The long steps' rate (``every`` N: periodic work such as an evaluation) and their indices.

    Timed, not counted: the window's per-step work in ms, so an evaluation every 5 steps shows as a step
    several times the median's at one fixed gap, and :func:`rate` decides whether the gap is regular. On a
    busy machine an ordinary step now and then runs twice the median too, so the bar is raised (x2, x3, x5,
    x8, x13) until the long steps recur regularly or fewer than two are left.
    """
    first: tuple[Rate, list[int]] | None = None
    for bar in (factor, 3.0, 5.0, 8.0, 13.0):
        if bar < factor:
            continue
        hits = long_steps(work_ms, bar)
        marks = set(hits)
        found = rate([1 if i in marks else 0 for i in range(len(work_ms))]), hits
        first = first or found
        if found[0].periodic or len(hits) < 2:
            return found if found[0].periodic else first
    return first or (rate([0] * len(work_ms)), [])


@dataclass(frozen=True)
class Epochs:
    """The epochs that started inside a window: how many, and at which steps (None: a Result that kept no positions).

    Long steps that recur with the epochs are the loader's, not periodic work of the job's: workers forked again at
    an epoch's start, shut down at its end, the loop's own epoch end. They are told apart by position when the
    window kept its epoch starts, else by count: ``count`` starts among ``steps`` consecutive steps allow an epoch of
    L steps only when (count - 1) * L <= steps - 1 and (count + 1) * L >= steps + 1. The count alone cannot place
    the epochs: a 10-step window with 2 starts allows L = 4..9 (``steps / count`` would say 5).
    """

    count: int
    starts: tuple[int, ...] | None = None

    @classmethod
    def of(cls, samples: Mapping[str, Sequence[float]]) -> Epochs:
        starts = samples.get("epoch_start_step")
        kept = None if starts is None else tuple(int(i) for i in starts)
        return cls(len(samples.get("epoch_fetch_ms", [])), kept)

    def own(self, every: int | None, hits: Sequence[int], steps: int) -> bool:
        """Whether long steps at ``hits``, recurring every ``every`` steps, are these epochs' own."""
        if every is None or self.count < 1 or not hits:
            return False
        if self.starts is not None:  # at an epoch's first step, or the step that ended the epoch before it
            ends = {i - 1 for i in self.starts}
            return all(i in self.starts or i in ends for i in hits)
        fits_upper = self.count < 2 or (self.count - 1) * every <= steps - 1
        return fits_upper and (self.count + 1) * every >= steps + 1


@dataclass(frozen=True)
class WindowPeriodic:
    """The window's steps that carry periodic work: the one answer input efficiency, the ledger and doctor share.

    ``every`` None: none found, with the ``reason`` (too few steps to tell, the epochs' own steps, none).
    """

    every: int | None
    steps: tuple[int, ...] = ()
    extra_ms: float = 0.0  # their work beyond the median step's, summed
    reason: str | None = None


def _phase_steps(work_ms: Sequence[float], every: int) -> list[int]:
    """The steps at the phase of ``every`` whose work is the largest: where work done every N steps falls."""
    n = len(work_ms)
    best = max(range(every), key=lambda p: sum(work_ms[p::every]) / max(1, len(work_ms[p::every])))
    return list(range(best, n, every))


def _stands_out(work_ms: Sequence[float], steps: Sequence[int], factor: float = LONG_STEP) -> bool:
    """Whether each of ``steps`` stands out from the median of the other steps' work, as a long step does."""
    others = sorted(w for i, w in enumerate(work_ms) if i not in set(steps))
    if not others or not steps:
        return False
    median = others[len(others) // 2]
    return all(work_ms[i] > factor * median and work_ms[i] - median >= LONG_STEP_MIN_MS for i in steps)


def window_periodic(
    work_ms: Sequence[float], epochs: Epochs | None = None, hints: Sequence[int] = ()
) -> WindowPeriodic:
    """The window's periodic steps from its per-step work (wall less the wait for the batch), in ms.

    ``hints``: the periods the sync probe's scan found (an evaluation reads its metrics back every N steps),
    each taken, shortest first, as the period when the window's steps at one phase of it stand out; else the timed scan
    (:func:`periodic_steps`), whose period is then cut to its smallest divisor whose steps all stand out (a
    busy machine hides some evaluation steps: every 10 found where every 5 was the truth). A period the window
    holds fewer than twice cannot be told from a one-off: said so, and nothing left out.
    """
    n = len(work_ms)
    for every in sorted({h for h in hints if h > 1}):
        if n < 2 * every:
            return WindowPeriodic(None, reason=f"too few steps to tell: {n} window steps, work every {every} steps")
        steps = _phase_steps(work_ms, every)
        if _stands_out(work_ms, steps, factor=1.5):
            return _own_or(work_ms, epochs, every, steps)
    r, hits = periodic_steps(work_ms)
    if not r.periodic or r.every is None:
        if len(hits) == 1:
            return WindowPeriodic(None, reason=f"one long step in {n} window steps: too few steps to tell if it recurs")
        return WindowPeriodic(None, reason="no step's own work stood out at a fixed gap")
    period, steps = r.every, hits
    for d in range(2, period):
        if period % d == 0 and n >= 2 * d:
            candidate = _phase_steps(work_ms, d)
            if set(hits) <= set(candidate) and _stands_out(work_ms, candidate, factor=1.5):
                period, steps = d, candidate
                break
    return _own_or(work_ms, epochs, period, steps)


def _own_or(work_ms: Sequence[float], epochs: Epochs | None, every: int, steps: Sequence[int]) -> WindowPeriodic:
    if epochs is not None and epochs.own(every, steps, len(work_ms)):
        return WindowPeriodic(None, reason=f"long steps every {every} steps fall with the epochs: the loader's")
    others = sorted(w for i, w in enumerate(work_ms) if i not in set(steps))
    median = others[len(others) // 2] if others else 0.0
    return WindowPeriodic(every, tuple(steps), sum(max(0.0, work_ms[i] - median) for i in steps))
