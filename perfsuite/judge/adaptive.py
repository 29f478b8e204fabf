"""The decision loop behind ``perfsuite ab``: interleaved rounds, paired differences, a three-way verdict.

Pure functions over per-run values, no processes and no clock of their own,
so the loop is unit-tested exactly on seeded synthetic samples.

**Design.** Each round runs the two revisions in fresh processes in ABBA or
BAAB order, picked at random (seeded) per round. Every round yields two
*pairs* of adjacent runs (positions 1-2 and 3-4), each holding one run of
each side; a pair's value is ``d = log(head) - log(base)`` of a per-run
statistic (by default the run's fastest step time per sample, see
``perfsuite.ab.engine.RUN_STATISTICS``). Adjacent runs share the machine's
state of the moment, so slow drift (the 11% run-to-run CV of a shared VM)
cancels within a pair, and ABBA cancels a linear trend within a round.
Randomising the order makes the pairs' signs exchangeable under "no change",
which is all the signed-rank test below assumes.

**The verdict** after ``n`` pairs (:func:`decide`):

* ``regressed``: the head is slower by more than ``factor`` (the mean of
  ``d`` above ``log(factor)``), AND a one-sided Wilcoxon signed-rank test of
  ``d`` (``scipy.stats.wilcoxon``, exact at small n) gives p < ``alpha``,
  AND the ``1 - 2*alpha`` t-interval of the mean lies above 0.
* ``improved``: the mirror image.
* ``same``: the ``confidence`` t-interval of the mean ratio lies within
  ``[1/margin, margin]`` (an equivalence test, TOST).
* ``unknown``: anything else, or fewer than ``min_pairs`` pairs; the
  decision says what would decide it (about how many more pairs).

The loop (:class:`AdaptiveAB`) asks for rounds while any test is unknown,
freezes each test's verdict at its first decision (looking again after a
decision would spend the false-alarm rate twice), and stops at
``max_rounds`` or when the caller's time budget runs out.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

ORDERS = ("ABBA", "BAAB")


class ABOutcome(str, Enum):
    REGRESSED = "regressed"
    SAME = "same"
    IMPROVED = "improved"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ABRule:
    """The thresholds of :func:`decide`; the defaults are what ``perfsuite ab`` uses."""

    factor: float = 1.05  # a regression must exceed this ratio
    margin: float = 1.05  # "same" needs the interval within [1/margin, margin]
    alpha: float = 0.002  # one-sided significance per look (asv's p < 0.002)
    confidence: float = 0.90  # of the "same" interval (two one-sided tests at 5%)
    min_pairs: int = 6  # 3 rounds

    def __post_init__(self) -> None:
        from perfsuite.errors import PerfsuiteError

        if not (math.isfinite(self.factor) and self.factor > 1.0) or not (
            math.isfinite(self.margin) and self.margin > 1.0
        ):
            raise PerfsuiteError(
                f"factor={self.factor!r}, margin={self.margin!r}: both must be numbers above 1, e.g. 1.05 for 5%"
            )
        if not 0.0 < self.alpha < 0.5 or not 0.5 <= self.confidence < 1.0:
            raise PerfsuiteError(
                f"alpha={self.alpha!r} must lie in (0, 0.5) and confidence={self.confidence!r} in "
                "[0.5, 1); write e.g. alpha=0.002, confidence=0.9"
            )
        if self.min_pairs < 2:
            raise PerfsuiteError(f"min_pairs={self.min_pairs!r} must be at least 2")


DEFAULT_RULE = ABRule()


@dataclass(frozen=True)
class Decision:
    """One test's verdict after ``pairs`` pairs; ``needs`` says what would decide an unknown."""

    outcome: ABOutcome
    pairs: int
    ratio: float | None = None  # exp(mean d): head / base
    low: float | None = None  # the `confidence` interval of the ratio
    high: float | None = None
    p_slower: float | None = None
    p_faster: float | None = None
    reason: str = ""
    needs: str = ""
    more_pairs: int | None = None  # estimated further pairs to a decision (None: none estimated)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome.value
        return out


def _t_quantile(q: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(q, df))


def _signed_rank_p(d: Sequence[float], alternative: str) -> float:
    """One-sided Wilcoxon signed-rank p-value (exact without ties or zeros at n <= 50), 1.0 when all d are 0."""
    from scipy.stats import wilcoxon

    if all(x == 0.0 for x in d):
        return 1.0
    nonzero = [x for x in d if x != 0.0]
    exact = len(nonzero) == len(d) and len(set(abs(x) for x in d)) == len(d) and len(d) <= 50
    p = float(wilcoxon(d, alternative=alternative, method="exact" if exact else "approx").pvalue)
    return 1.0 if math.isnan(p) else p


def decide(pairs: Sequence[tuple[float, float]], rule: ABRule = DEFAULT_RULE) -> Decision:
    """The verdict for (base, head) pairs of positive per-run values (lower is better)."""
    n = len(pairs)
    if any(not (b > 0 and h > 0 and math.isfinite(b) and math.isfinite(h)) for b, h in pairs):
        return Decision(
            ABOutcome.UNKNOWN,
            n,
            reason="a run gave a non-positive or non-finite value",
            needs="fix the failing runs; a ratio needs positive times",
        )
    if n < rule.min_pairs:
        return Decision(
            ABOutcome.UNKNOWN,
            n,
            reason=f"{n} pair(s) so far",
            needs=f"at least {rule.min_pairs} pairs ({math.ceil(rule.min_pairs / 2)} rounds)",
            more_pairs=rule.min_pairs - n,
        )
    d = [math.log(h) - math.log(b) for b, h in pairs]
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    t_same = _t_quantile(0.5 + rule.confidence / 2, n - 1)
    t_sig = _t_quantile(1 - rule.alpha, n - 1)
    low, high = mean - t_same * se, mean + t_same * se
    p_slower, p_faster = _signed_rank_p(d, "greater"), _signed_rank_p(d, "less")
    log_f, log_m = math.log(rule.factor), math.log(rule.margin)
    base = dict(
        pairs=n, ratio=math.exp(mean), low=math.exp(low), high=math.exp(high), p_slower=p_slower, p_faster=p_faster
    )
    ci = f"x{math.exp(mean):.3f}, {rule.confidence:.0%} CI x{math.exp(low):.3f}..x{math.exp(high):.3f}, n={n} pairs"
    if mean > log_f and p_slower < rule.alpha and mean - t_sig * se > 0:
        return Decision(
            ABOutcome.REGRESSED,
            reason=f"slower by more than x{rule.factor:g} ({ci}, p_slower={p_slower:.2g} < {rule.alpha:g})",
            **base,  # type: ignore[arg-type]
        )
    if mean < -log_f and p_faster < rule.alpha and mean + t_sig * se < 0:
        return Decision(
            ABOutcome.IMPROVED,
            reason=f"faster by more than x{rule.factor:g} ({ci}, p_faster={p_faster:.2g} < {rule.alpha:g})",
            **base,  # type: ignore[arg-type]
        )
    if -log_m <= low and high <= log_m:
        return Decision(ABOutcome.SAME, reason=f"within x{1 / rule.margin:.3g}..x{rule.margin:g} ({ci})", **base)  # type: ignore[arg-type]
    more, needs = _what_would_decide(mean, sd, n, rule, t_same, t_sig, p_slower, p_faster)
    return Decision(
        ABOutcome.UNKNOWN,
        reason=f"undecided ({ci}, p_slower={p_slower:.2g})",
        needs=needs,
        more_pairs=more,
        **base,  # type: ignore[arg-type]
    )


def _what_would_decide(
    mean: float, sd: float, n: int, rule: ABRule, t_same: float, t_sig: float, p_slower: float, p_faster: float
) -> tuple[int | None, str]:
    """Pairs needed, at the current mean and spread, for the interval to fit the margin or the effect to be
    significant; whichever comes first."""
    log_f, log_m = math.log(rule.factor), math.log(rule.margin)
    options: list[tuple[int, str]] = []
    if sd == 0.0:
        return None, "the pairs do not vary; a different revision or margin would decide"
    room = log_m - abs(mean)
    if room > 0:
        need = math.ceil((t_same * sd / room) ** 2)
        options.append(
            (
                max(need - n, 1),
                f"same, once the interval fits within x{1 / rule.margin:.3g}.."
                f"x{rule.margin:g} (about {need} pairs at spread {sd:.3f})",
            )
        )
    if abs(mean) > log_f:
        need = math.ceil((t_sig * sd / abs(mean)) ** 2)
        # a signed-rank p below alpha needs at least log2(1/alpha) pairs
        need = max(need, math.ceil(math.log2(1 / rule.alpha)), n + 1)
        word = "regressed" if mean > 0 else "improved"
        options.append(
            (need - n, f"{word}, if x{math.exp(mean):.3f} holds until p < {rule.alpha:g} (about {need} pairs)")
        )
    if not options:
        return None, (
            f"the estimate x{math.exp(mean):.3f} lies between the margin x{rule.margin:g} and the "
            f"regression factor x{rule.factor:g}; more pairs narrow it, a smaller factor would decide"
        )
    more, text = min(options)
    return more, f"about {more} more pairs ({math.ceil(more / 2)} rounds): {text}"


# --------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class RunValues:
    """What one run contributes per test: the per-run statistic the verdict is on, and any extras."""

    value: float
    extras: Mapping[str, float] = field(default_factory=dict)


def round_orders(rng: random.Random, rounds: int) -> list[str]:
    """ABBA or BAAB per round, from a seeded random generator."""
    return [rng.choice(ORDERS) for _ in range(rounds)]


def round_pairs(order: str, runs: Sequence[RunValues | None]) -> list[tuple[RunValues, RunValues]]:
    """(base, head) pairs of adjacent runs of one round; a pair with a missing run is dropped."""
    out = []
    for i in range(0, len(order) - 1, 2):
        a, b = runs[i], runs[i + 1]
        if a is None or b is None:
            continue
        out.append((a, b) if order[i] == "A" else (b, a))
    return out


@dataclass
class TestTrack:
    """One test's pairs across rounds and its (frozen) decision."""

    pairs: list[tuple[RunValues, RunValues]] = field(default_factory=list)
    decision: Decision = field(default_factory=lambda: Decision(ABOutcome.UNKNOWN, 0, needs="no round yet"))
    decided_at: int | None = None  # the round whose pairs decided it

    @property
    def open(self) -> bool:
        return self.decision.outcome is ABOutcome.UNKNOWN


class AdaptiveAB:
    """Feed rounds with :meth:`add_round`; :meth:`pending` lists the tests still unknown."""

    def __init__(self, rule: ABRule = DEFAULT_RULE, seed: int = 0) -> None:
        self.rule = rule
        self.rng = random.Random(seed)
        self.tracks: dict[str, TestTrack] = {}
        self.orders: list[str] = []

    def next_order(self) -> str:
        return self.rng.choice(ORDERS)

    def add_round(self, order: str, runs: Mapping[str, Sequence[RunValues | None]]) -> None:
        """One round's per-run values per test, in the order the runs ran (a missing run is None)."""
        if order not in ORDERS:
            raise ValueError(f"order={order!r}; write one of {ORDERS}")
        self.orders.append(order)
        for test_id, values in runs.items():
            track = self.tracks.setdefault(test_id, TestTrack())
            track.pairs += round_pairs(order, values)
            if track.open:
                track.decision = decide([(b.value, h.value) for b, h in track.pairs], self.rule)
                if not track.open:
                    track.decided_at = len(self.orders)

    def pending(self) -> list[str]:
        return [t for t, track in self.tracks.items() if track.open]

    def done(self) -> bool:
        return bool(self.tracks) and not self.pending()


def run_loop(
    measure: Callable[[str, int], Mapping[str, Sequence[RunValues | None]]],
    rule: ABRule = DEFAULT_RULE,
    seed: int = 0,
    min_rounds: int = 3,
    max_rounds: int = 20,
    keep_going: Callable[[AdaptiveAB], bool] | None = None,
) -> AdaptiveAB:
    """The adaptive loop: rounds until every test is decided, ``max_rounds``, or ``keep_going`` says stop.

    ``measure(order, round_index)`` runs one round in ``order`` and returns
    each test's four run values in run order. ``keep_going`` is where the
    caller's time budget lives (checked before each round after the first).
    """
    loop = AdaptiveAB(rule, seed)
    for r in range(max_rounds):
        if r >= min_rounds and loop.done():
            break
        if r and keep_going is not None and not keep_going(loop):
            break
        order = loop.next_order()
        loop.add_round(order, measure(order, r))
    return loop
